package main

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/config"
)

// The ledger must not remember an op longer than the order remembers its event: a
// redelivery after the done marker expired would find its operations answered from
// memory, moving nothing, while the order counted them again.
func TestOpRetentionWithinDoneRetention(t *testing.T) {
	for _, c := range []struct {
		done, op string
		bad      bool
	}{
		{"96h", "168h", true},
		{"96h", "96h", false},
		{"168h", "96h", false},
	} {
		t.Setenv("JUNBAN_DONE_RETENTION", c.done)
		t.Setenv("JUNBAN_OP_RETENTION", c.op)
		_, err := config.Load[Config]()
		got := err != nil && strings.Contains(err.Error(), "JUNBAN_OP_RETENTION: must not be longer")
		if got != c.bad {
			t.Errorf("done %s, op %s: error %v, want the retention problem: %v", c.done, c.op, err, c.bad)
		}
	}
}
