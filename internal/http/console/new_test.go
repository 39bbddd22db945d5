package console

import (
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := New(Config{})
	testenv.ErrorNames(t, err, "API", "Redis", "DB")
}
