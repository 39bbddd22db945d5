package idempotency

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// twiceGuard is a Guard whose client reaches Redis through a testenv.ReplyDropper armed
// for one script, and a client of Redis that bypasses it.
func twiceGuard(t *testing.T, script *redis.Script) (*Guard, *testenv.ReplyDropper, redis.UniversalClient) {
	t.Helper()
	direct, prefix := testenv.Redis(t)
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(script.Hash()))
	g, err := New(Config{Redis: testenv.RedisVia(t, d.Addr()), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return g, d, direct
}

func wantDropped(t *testing.T, d *testenv.ReplyDropper) {
	t.Helper()
	if d.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", d.Dropped())
	}
}

// Each of the gateway's scripts, run twice because its reply was lost, answers as its
// first run would have: Begin is new (its own lock), Complete succeeds (its own record),
// Release leaves the lock gone; nothing is written a second time.
//
// Broken variants tried (TestResentBeginIsNew and TestResentCompleteSucceeds name them
// too): begin.lua without the branch for the caller's own lock value: Begin answered
// in_progress; complete.lua without the token in the record: Complete answered
// ErrLockLost.
func TestScriptsTwiceAnswerOnce(t *testing.T) {
	ctx := context.Background()
	h := Hash([]byte("p"))

	t.Run("begin", func(t *testing.T) {
		g, d, direct := twiceGuard(t, beginScript)
		c, err := g.Begin(ctx, "k", h)
		wantDropped(t, d)
		if err != nil || c.State != StateNew {
			t.Fatalf("Begin run twice: %v %+v, want new", err, c)
		}
		if v, _ := direct.Get(ctx, c.lock).Result(); v != c.value {
			t.Fatalf("lock %q, want the claim's %q", v, c.value)
		}
	})

	t.Run("complete", func(t *testing.T) {
		g, d, direct := twiceGuard(t, completeScript)
		c, err := g.Begin(ctx, "k", h)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Complete(ctx, []byte("r")); err != nil {
			t.Fatalf("Complete run twice: %v, want nil", err)
		}
		wantDropped(t, d)
		rec, err := direct.HGetAll(ctx, c.done).Result()
		if err != nil || rec["response"] != "r" || rec["token"] != c.value {
			t.Fatalf("record %v (%v), want the response r under the claim's token", rec, err)
		}
		if n, _ := direct.Exists(ctx, c.lock).Result(); n != 0 {
			t.Fatal("the lock outlived its Complete")
		}
	})

	t.Run("release", func(t *testing.T) {
		g, d, direct := twiceGuard(t, releaseScript)
		c, err := g.Begin(ctx, "k", h)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Release(ctx); err != nil {
			t.Fatalf("Release run twice: %v", err)
		}
		wantDropped(t, d)
		if n, _ := direct.Exists(ctx, c.lock).Result(); n != 0 {
			t.Fatal("the lock outlived its Release")
		}
		next, err := g.Begin(ctx, "k", h)
		if err != nil || next.State != StateNew {
			t.Fatalf("Begin after the release: %v %+v, want new", err, next)
		}
	})
}
