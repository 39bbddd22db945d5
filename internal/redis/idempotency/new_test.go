package idempotency_test

import (
	"testing"

	"github.com/junban/junban/internal/redis/idempotency"
	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := idempotency.New(idempotency.Config{})
	testenv.ErrorNames(t, err, "Redis")
}
