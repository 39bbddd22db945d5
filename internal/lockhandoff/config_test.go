package lockhandoff

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Validate reports every problem at once, counts zero fields as their defaults, and New
// refuses what it refuses.
//
// Broken variant tried: Validate returning at its first problem: the Handler and Prefix
// problems were missing.
func TestConfigValidate(t *testing.T) {
	err := Config{Detached: -1}.Validate()
	if err == nil {
		t.Fatal("an empty Config validated")
	}
	for _, want := range []string{"Redis is nil", "Handler is nil", "Prefix is empty", "Detached -1 is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to say %q", err, want)
		}
	}
	if _, nerr := New(Config{Detached: -1}); nerr == nil || nerr.Error() != err.Error() {
		t.Errorf("New: %v, want Validate's %v", nerr, err)
	}
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rc.Close()
	ok := Config{Redis: rc, Prefix: "p", Handler: steps(func(context.Context, Turn, []byte) error { return nil })}
	if err := ok.Validate(); err != nil {
		t.Errorf("a Config with defaults: %v", err)
	}
	if ok.LockTTL != 0 {
		t.Error("Validate changed its Config")
	}
}
