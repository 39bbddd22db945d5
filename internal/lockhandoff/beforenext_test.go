package lockhandoff

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A handler's BeforeNext commands run after it returned and before the next envelope's
// handler starts; a failed handler's are dropped.
func TestBeforeNextRunsBeforeTheNextHandler(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	mark := Key(prefix, "bn", "mark")
	var mu sync.Mutex
	var seen []string
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, Config{HandlerRetries: -1}, func(hctx context.Context, tr Turn, env []byte) error {
		v, _ := rc.Get(hctx, mark).Result()
		mu.Lock()
		seen = append(seen, string(env)+"@"+v)
		mu.Unlock()
		if string(env) == "first" {
			// The second envelope queues behind us while we hold the turn.
			if out, err := hd.Submit(ctx, "bn", []byte("second")); err != nil || out != OutcomeQueued {
				t.Errorf("second: %v %v", out, err)
			}
		}
		if string(env) == "fails" {
			BeforeNext(hctx, func(ctx context.Context, p redis.Pipeliner) { p.Set(ctx, mark, "from-fails", 0) })
			return errors.New("boom")
		}
		if !BeforeNext(hctx, func(ctx context.Context, p redis.Pipeliner) { p.Set(ctx, mark, "after-"+string(env), 0) }) {
			t.Error("BeforeNext refused a handler's context")
		}
		return nil
	})
	if _, err := hd.Submit(ctx, "bn", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if got := rc.Get(ctx, mark).Val(); got != "after-second" {
		t.Fatalf("mark after the drain = %q, want after-second", got)
	}
	mu.Lock()
	if len(seen) != 2 || seen[0] != "first@" || seen[1] != "second@after-first" {
		t.Errorf("handlers saw %q", seen)
	}
	mu.Unlock()
	if _, err := hd.Submit(ctx, "bn2", []byte("fails")); err != nil {
		t.Fatal(err)
	}
	if got := rc.Get(ctx, mark).Val(); got != "after-second" {
		t.Fatalf("a failed handler's command ran: mark %q", got)
	}
	if BeforeNext(ctx, func(context.Context, redis.Pipeliner) {}) {
		t.Fatal("BeforeNext accepted a context that is not a handler's")
	}
}
