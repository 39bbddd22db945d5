package event_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
)

func TestCheckID(t *testing.T) {
	for _, id := range []string{"LC-1", "sku:ABC-9", "注文-1", "a b", "A\uFFFDB", ""} {
		if err := event.CheckID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
	for _, id := range []string{"{", "}", "a{b}c", "\x00", "a\nb", "\x7f", "\u0085", "a\xffb"} {
		if err := event.CheckID(id); !errors.Is(err, event.ErrInvalidID) {
			t.Errorf("%q: %v, want ErrInvalidID", id, err)
		}
	}
}

// TestCheckIDRefusesJunbansOwnMark: "~" marks every name junban makes for itself (a
// quarantine's record, a redriven event's operations, an expiry's event), so no id a sender
// sends may hold it.
func TestCheckIDRefusesJunbansOwnMark(t *testing.T) {
	for _, id := range []string{"~", "E2~q1", "E2~q1.1", "G~1", "~expiry:1:LC-1", "a~"} {
		if err := event.CheckID(id); !errors.Is(err, event.ErrReservedID) || !errors.Is(err, event.ErrInvalidID) {
			t.Errorf("%q: %v, want ErrReservedID", id, err)
		}
	}
	lcid := "LC-1"
	if id := event.ExpiryEventID(lcid, time.Unix(1_800_000_000, 0)); !strings.HasPrefix(id, event.OwnMark) {
		t.Errorf("expiry id %q is not in junban's namespace", id)
	}
	if id := event.ExpiryEventID(strings.Repeat("x", event.MaxIDLength), time.Unix(1_800_000_000, 0)); !strings.HasPrefix(id, event.OwnMark) || len(id) > event.MaxIDLength {
		t.Errorf("hashed expiry id %q is not in junban's namespace or too long", id)
	}
}

// TestCheckIDRefusesWhatSQSCannotCarry: SQS and SNS take only #x9 | #xA | #xD |
// #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF; an id outside that set would make every
// result that names it unpublishable.
func TestCheckIDRefusesWhatSQSCannotCarry(t *testing.T) {
	for _, id := range []string{"FF-\uffff", "\ufffe", "a\uFFFFb"} {
		if err := event.CheckID(id); !errors.Is(err, event.ErrInvalidID) {
			t.Errorf("%q: %v, want ErrInvalidID", id, err)
		}
	}
	for _, id := range []string{"\ufffd", "\U0001F600", "\ue000"} {
		if err := event.CheckID(id); err != nil {
			t.Errorf("%q refused: %v", id, err)
		}
	}
}

// TestCarriable: the characters SQS and SNS documents, at each edge of the allowed set.
func TestCarriable(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"plain", true}, {"\t\n\r", true}, {" ", true}, {"\ud7ff", true}, {"\ue000", true}, {"\ufffd", true},
		{"\U00010000", true}, {"\U0010FFFF", true}, {"", true},
		{"\x00", false}, {"\x1f", false}, {"\ufffe", false}, {"\uffff", false}, {"a\xffb", false},
	} {
		if got := event.Carriable(c.s); got != c.want {
			t.Errorf("Carriable(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

func TestCheckLCID(t *testing.T) {
	for _, lcid := range []string{"LC-1", "注文-1", "", "SKU:B", "sku", "skus:1", "LC-sku:1", strings.Repeat("x", event.MaxIDLength)} {
		if err := event.CheckLCID(lcid); err != nil {
			t.Errorf("%q refused: %v", lcid, err)
		}
	}
	for _, lcid := range []string{"sku:SKU-B", "sku:", "sku:" + strings.Repeat("x", event.MaxIDLength-4)} {
		if err := event.CheckLCID(lcid); !errors.Is(err, event.ErrReservedLCID) || !errors.Is(err, event.ErrInvalidID) {
			t.Errorf("%q: %v, want ErrReservedLCID", lcid, err)
		}
	}
	if err := event.CheckLCID(strings.Repeat("x", event.MaxIDLength+1)); !errors.Is(err, event.ErrIDTooLong) || !errors.Is(err, event.ErrInvalidID) {
		t.Errorf("over-long: %v, want ErrIDTooLong", err)
	}
	for _, lcid := range []string{"{", "a{b}c", "\x00", "a\nb", "a\xffb"} {
		if err := event.CheckLCID(lcid); !errors.Is(err, event.ErrInvalidID) || errors.Is(err, event.ErrReservedLCID) {
			t.Errorf("%q: %v, want ErrInvalidID", lcid, err)
		}
	}
}

// FuzzCheckLCID: the checks never panic; an lcid CheckLCID accepts is an id CheckID
// accepts, within MaxIDLength, and can never be a SKU's entity; every refusal wraps
// ErrInvalidID and quotes at most a bounded part of the id.
func FuzzCheckLCID(f *testing.F) {
	for _, s := range []string{"LC-1", "sku:SKU-B", "sku:", "SKU:1", "{x}", "a\x00", "\xff", "注文-1", "", strings.Repeat("y", event.MaxIDLength+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lcid string) {
		idErr, lcidErr := event.CheckID(lcid), event.CheckLCID(lcid)
		for _, err := range []error{idErr, lcidErr} {
			if err != nil && (!errors.Is(err, event.ErrInvalidID) || len(err.Error()) > 400) {
				t.Fatalf("%q: %v (%d bytes)", lcid, err, len(err.Error()))
			}
		}
		if lcidErr != nil {
			return
		}
		if idErr != nil || len(lcid) > event.MaxIDLength || strings.HasPrefix(lcid, event.SKUEntityPrefix) {
			t.Fatalf("CheckLCID accepted %q (CheckID: %v, %d bytes)", lcid, idErr, len(lcid))
		}
		if strings.ContainsAny(lcid, "{}"+event.OwnMark) || !event.Carriable(lcid) {
			t.Fatalf("CheckLCID accepted %q, which cannot name keys", lcid)
		}
	})
}
