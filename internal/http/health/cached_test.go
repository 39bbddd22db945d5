package health

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

// counted wraps c and counts its runs.
func counted(c Check) (Check, *atomic.Int64) {
	n := &atomic.Int64{}
	return func(ctx context.Context) error { n.Add(1); return c(ctx) }, n
}

// Concurrent callers within the TTL share one run of the check, a success or a failure.
// Broken variant tried: Cached returning c itself ran the Redis PING 50 times.
func TestCachedChecksOncePerTTL(t *testing.T) {
	t.Parallel()
	rc, _ := testenv.Redis(t)
	dead, err := config.Redis{URL: "redis://127.0.0.1:1/0"}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	for name, tc := range map[string]struct {
		check Check
		fails bool
	}{"up": {RedisCheck(rc), false}, "down": {RedisCheck(dead), true}} {
		t.Run(name, func(t *testing.T) {
			check, runs := counted(tc.check)
			cached := Cached(check, time.Hour)
			const callers = 50
			errs := make(chan error, callers)
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() { errs <- cached(context.Background()) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if (err != nil) != tc.fails {
					t.Fatalf("cached check: %v, want failure %v", err, tc.fails)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("%d callers ran the check %d times, want 1", callers, n)
			}
		})
	}
}

// With the TTL passed, the next call runs the check again.
func TestCachedRunsAgainAfterTTL(t *testing.T) {
	t.Parallel()
	rc, _ := testenv.Redis(t)
	check, runs := counted(RedisCheck(rc))
	cached := Cached(check, 0) // every result is stale at once
	for range 3 {
		if err := cached(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("3 calls past the TTL ran the check %d times, want 3", n)
	}
}

// A caller that gives up gets its context's error; the run goes on and its result serves
// the next caller without another run.
func TestCachedCallerGivesUp(t *testing.T) {
	t.Parallel()
	rc, _ := testenv.Redis(t)
	release := make(chan struct{})
	check, runs := counted(func(ctx context.Context) error {
		<-release // the first run is slow: its caller gives up meanwhile
		return RedisCheck(rc)(ctx)
	})
	cached := Cached(check, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cached(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("caller gone: %v, want context.Canceled", err)
	}
	close(release)
	if err := cached(context.Background()); err != nil {
		t.Fatalf("after the run: %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the check ran %d times, want 1", n)
	}
}
