package api

import (
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := New(ServerConfig{})
	testenv.ErrorNames(t, err, "Redis", "Ledger", "DB")
}
