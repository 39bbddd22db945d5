package event_test

import (
	"errors"
	"strings"
	"testing"

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
		if lcid != "" && strings.ContainsAny(lcid, "{}") {
			t.Fatalf("CheckLCID accepted %q, which cannot name keys", lcid)
		}
	})
}
