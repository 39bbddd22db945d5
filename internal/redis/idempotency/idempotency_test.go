package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/idempotency"
	"github.com/junban/junban/internal/testenv"
)

func newGuard(t *testing.T, cfg idempotency.Config) (*idempotency.Guard, redis.UniversalClient, string) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	cfg.Redis, cfg.Prefix = rc, prefix
	g, err := idempotency.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, rc, prefix
}

func TestNewCompleteReplay(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	g, _, _ := newGuard(t, idempotency.Config{Now: func() time.Time { return at }})
	h := idempotency.Hash([]byte("payload"))

	c, err := g.Begin(ctx, "stripe:evt_1", h)
	if err != nil || c.State != idempotency.StateNew {
		t.Fatalf("first Begin: %v, %+v", err, c)
	}
	if err := c.Complete(ctx, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	again, err := g.Begin(ctx, "stripe:evt_1", h)
	if err != nil {
		t.Fatal(err)
	}
	if again.State != idempotency.StateCompleted || string(again.Response) != `{"ok":true}` || !again.CompletedAt.Equal(at) {
		t.Fatalf("replay: %+v", again)
	}
	_, err = g.Begin(ctx, "stripe:evt_1", idempotency.Hash([]byte("other payload")))
	if !errors.Is(err, idempotency.ErrPayloadMismatch) {
		t.Fatalf("other payload after completion: %v, want ErrPayloadMismatch", err)
	}
}

func TestInProgressAndMismatchWhileInProgress(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newGuard(t, idempotency.Config{})
	h := idempotency.Hash([]byte("p"))
	c, err := g.Begin(ctx, "k", h)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := g.Begin(ctx, "k", h)
	if !errors.Is(err, idempotency.ErrInProgress) || dup.State != idempotency.StateInProgress {
		t.Fatalf("duplicate: %v %+v", err, dup)
	}
	if dup.RetryAfter <= 0 || dup.RetryAfter > idempotency.LockTTLDefault {
		t.Fatalf("RetryAfter %v outside (0, %v]", dup.RetryAfter, idempotency.LockTTLDefault)
	}
	if _, err := g.Begin(ctx, "k", idempotency.Hash([]byte("q"))); !errors.Is(err, idempotency.ErrPayloadMismatch) {
		t.Fatalf("other payload while in progress: %v", err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := g.Begin(ctx, "k", h)
	if err != nil || next.State != idempotency.StateNew {
		t.Fatalf("after release: %v %+v", err, next)
	}
}

func TestConcurrentBeginOneWinner(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newGuard(t, idempotency.Config{})
	h := idempotency.Hash([]byte("p"))
	const n = 50
	var wins, busy, replays atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := g.Do(ctx, "concurrent", h, func(context.Context) ([]byte, error) {
				wins.Add(1)
				time.Sleep(50 * time.Millisecond) // widen the window for duplicates
				return []byte("r"), nil
			})
			switch {
			case errors.Is(err, idempotency.ErrInProgress):
				busy.Add(1)
			case err != nil:
				t.Error(err)
			case res.Replayed:
				replays.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("work ran %d times, want 1", wins.Load())
	}
	if got := wins.Load() + busy.Load() + replays.Load(); got != n {
		t.Fatalf("answers add up to %d, want %d", got, n)
	}
}

func TestReleaseNeverDeletesAnotherHoldersLock(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	// a's holder has a short lock and stalls past it; b takes over with a long one.
	ga, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix, LockTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	h := idempotency.Hash([]byte("p"))
	a, err := ga.Begin(ctx, "k", h)
	if err != nil {
		t.Fatal(err)
	}
	var b *idempotency.Claim
	testenv.WaitFor(t, 20*time.Second, "takeover", func() bool {
		c, err := gb.Begin(ctx, "k", h)
		if err == nil && c.State == idempotency.StateNew {
			b = c
			return true
		}
		return false
	})
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := gb.Begin(ctx, "k", h); !errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("after the zombie's release: %v, want b's lock still held (ErrInProgress)", err)
	}
	if err := a.Complete(ctx, []byte("zombie")); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("zombie Complete: %v, want ErrLockLost", err)
	}
	if err := b.Complete(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	r, err := gb.Begin(ctx, "k", h)
	if err != nil || string(r.Response) != "b" {
		t.Fatalf("record: %v %+v", err, r)
	}
}

func TestDeadHolderTakenOver(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newGuard(t, idempotency.Config{LockTTL: 150 * time.Millisecond})
	h := idempotency.Hash([]byte("p"))
	if _, err := g.Begin(ctx, "k", h); err != nil { // the holder dies here
		t.Fatal(err)
	}
	var runs atomic.Int32
	testenv.WaitFor(t, 20*time.Second, "takeover", func() bool {
		res, err := g.Do(ctx, "k", h, func(context.Context) ([]byte, error) {
			runs.Add(1)
			return []byte("second holder"), nil
		})
		return err == nil && string(res.Response) == "second holder"
	})
	res, err := g.Do(ctx, "k", h, func(context.Context) ([]byte, error) {
		runs.Add(1)
		return nil, nil
	})
	if err != nil || !res.Replayed || string(res.Response) != "second holder" {
		t.Fatalf("after takeover: %v %+v", err, res)
	}
	if runs.Load() != 1 {
		t.Fatalf("work ran %d times, want 1", runs.Load())
	}
}

func TestLateCompletionWithoutTakeover(t *testing.T) {
	ctx := context.Background()
	g, rc, prefix := newGuard(t, idempotency.Config{LockTTL: 50 * time.Millisecond})
	h := idempotency.Hash([]byte("p"))
	c, err := g.Begin(ctx, "slow", h)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "lock expiry", func() bool {
		n, _ := rc.Keys(ctx, prefix+":idem:{slow}:lock").Result()
		return len(n) == 0
	})
	// The work happened; nobody else started it: the record is written.
	if err := c.Complete(ctx, []byte("late")); err != nil {
		t.Fatal(err)
	}
	r, err := g.Begin(ctx, "slow", h)
	if err != nil || r.State != idempotency.StateCompleted || string(r.Response) != "late" {
		t.Fatalf("%v %+v", err, r)
	}
}

func TestFailedWorkReleases(t *testing.T) {
	ctx := context.Background()
	g, _, _ := newGuard(t, idempotency.Config{})
	h := idempotency.Hash([]byte("p"))
	boom := errors.New("sqs down")
	if _, err := g.Do(ctx, "k", h, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Do: %v", err)
	}
	res, err := g.Do(ctx, "k", h, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || res.Replayed || string(res.Response) != "ok" {
		t.Fatalf("retry: %v %+v", err, res)
	}
}

func TestRetentionAndHashTag(t *testing.T) {
	ctx := context.Background()
	g, rc, prefix := newGuard(t, idempotency.Config{Retention: time.Hour})
	for _, key := range []string{"stripe:evt_1", "weird{key}", "}", ""} {
		c, err := g.Begin(ctx, key, "h")
		if err != nil {
			t.Fatalf("%q: %v", key, err)
		}
		if err := c.Complete(ctx, []byte("r")); err != nil {
			t.Fatalf("%q: %v", key, err)
		}
	}
	keys, err := rc.Keys(ctx, prefix+":idem:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var done int
	for _, k := range keys {
		if !strings.HasSuffix(k, ":done") {
			continue
		}
		done++
		// One hash tag per key: the braces of the key never bend it.
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 {
			t.Errorf("key %q has more than one brace pair", k)
		}
		ttl, err := rc.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s: PTTL %v %v, want (0, 1h]", k, ttl, err)
		}
	}
	if done != 4 {
		t.Fatalf("%d records, want 4: %v", done, keys)
	}
}

func TestRedisUnreachable(t *testing.T) {
	rc, err := config.Redis{URL: "redis://127.0.0.1:1/0"}.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	g, err := idempotency.New(idempotency.Config{Redis: rc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.Begin(ctx, "k", "h")
	if err == nil || c != nil || errors.Is(err, idempotency.ErrInProgress) {
		t.Fatalf("Begin against a closed port: %v %+v", err, c)
	}
}

func TestConfigValidate(t *testing.T) {
	err := idempotency.Config{Prefix: "a{b", LockTTL: -1, Retention: time.Microsecond}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"prefix", "lock TTL", "retention"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// fixedToken makes a guard's every Begin use tok, as a resent call does: go-redis resends
// a script whose reply was lost (read timeout, EOF) with the very same arguments.
func fixedToken(tok string) func() (string, error) {
	return func() (string, error) { return tok, nil }
}

// Failed against begin.lua without the branch for the caller's own lock value (the resend
// got in_progress), and against a variant matching the payload hash alone, not the token
// (the other token got new).
func TestResentBeginIsNew(t *testing.T) {
	ctx := context.Background()
	g, rc, prefix := newGuard(t, idempotency.Config{Token: fixedToken("t1")})
	other, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix, Token: fixedToken("t2")})
	if err != nil {
		t.Fatal(err)
	}
	h := idempotency.Hash([]byte("p"))
	if c, err := g.Begin(ctx, "k", h); err != nil || c.State != idempotency.StateNew {
		t.Fatalf("first Begin: %v %+v", err, c)
	}
	resent, err := g.Begin(ctx, "k", h)
	if err != nil || resent.State != idempotency.StateNew {
		t.Fatalf("resent Begin: %v %+v, want new", err, resent)
	}
	dup, err := other.Begin(ctx, "k", h)
	if !errors.Is(err, idempotency.ErrInProgress) || dup.State != idempotency.StateInProgress {
		t.Fatalf("Begin with another token: %v %+v, want ErrInProgress", err, dup)
	}
	if _, err := other.Begin(ctx, "k", idempotency.Hash([]byte("q"))); !errors.Is(err, idempotency.ErrPayloadMismatch) {
		t.Fatalf("another payload: %v, want ErrPayloadMismatch", err)
	}
	if err := resent.Complete(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if r, err := other.Begin(ctx, "k", h); err != nil || r.State != idempotency.StateCompleted || string(r.Response) != "r" {
		t.Fatalf("after Complete: %v %+v", err, r)
	}
}

// Failed against complete.lua without the token in the record (the resend got
// ErrLockLost), and against a variant answering success for any record with the same
// payload hash (the zombie's Complete got nil).
func TestResentCompleteSucceeds(t *testing.T) {
	ctx := context.Background()
	g, rc, prefix := newGuard(t, idempotency.Config{Token: fixedToken("t1")})
	h := idempotency.Hash([]byte("p"))
	c, err := g.Begin(ctx, "k", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, []byte("r")); err != nil {
		t.Fatalf("resent Complete: %v, want nil", err)
	}
	if r, err := g.Begin(ctx, "k", h); err != nil || r.State != idempotency.StateCompleted || string(r.Response) != "r" {
		t.Fatalf("record: %v %+v", err, r)
	}

	// A zombie with another token: its lock expires (deleted here, no sleep), t1 takes
	// over and completes; the zombie's Complete still finds the work done by another.
	zg, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix, Token: fixedToken("zombie")})
	if err != nil {
		t.Fatal(err)
	}
	z, err := zg.Begin(ctx, "k2", h)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Del(ctx, prefix+":idem:{k2}:lock").Err(); err != nil {
		t.Fatal(err)
	}
	b, err := g.Begin(ctx, "k2", h)
	if err != nil || b.State != idempotency.StateNew {
		t.Fatalf("takeover: %v %+v", err, b)
	}
	if err := b.Complete(ctx, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := z.Complete(ctx, []byte("zombie")); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("zombie Complete: %v, want ErrLockLost", err)
	}
	if r, err := g.Begin(ctx, "k2", h); err != nil || string(r.Response) != "b" {
		t.Fatalf("record: %v %+v", err, r)
	}
}
