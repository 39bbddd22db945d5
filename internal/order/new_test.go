package order_test

import (
	"testing"

	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := order.New(order.Config{Prefix: "a{b"})
	testenv.ErrorNames(t, err, "Redis", "Ledger", "Publisher", "Prefix")
}
