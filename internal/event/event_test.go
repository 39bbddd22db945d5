package event_test

import (
	"errors"
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
