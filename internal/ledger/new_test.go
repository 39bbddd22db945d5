package ledger_test

import (
	"testing"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := ledger.New(ledger.Config{OpRetention: -1})
	testenv.ErrorNames(t, err, "Redis", "Prefix", "OpRetention")
}
