package order

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
)

// A quarantine's result id fits what persistence accepts, whatever the event id's length.
func TestQuarantineIDFitsTheIDBound(t *testing.T) {
	if got := quarantineID("evt-1", 2); got != "evt-1~q2" {
		t.Errorf("short id: %q", got)
	}
	long := strings.Repeat("e", event.MaxIDLength)
	a, b := quarantineID(long, 1), quarantineID(long, 2)
	if len(a) > event.MaxIDLength || a == b || a != quarantineID(long, 1) {
		t.Errorf("long ids: %q %q", a, b)
	}
}
