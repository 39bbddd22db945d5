package lockhandoff

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// pipelineCounter counts the pipelines a client sends that carry INCR (a connection's
// handshake is a pipeline too).
type pipelineCounter struct{ n atomic.Int64 }

func (c *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (c *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "incr" }) {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// Calls that arrive while every slot is in flight share the next pipeline: with one slot
// held up, 40 calls go out in two round trips, not 40. Each call gets its own reply.
// Broken variant tried: a batcher that sends each call in a pipeline of its own (slots
// unbounded) sends 40 pipelines and fails the count.
func TestBatcherSharesPipelinesUnderLoad(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	var pc pipelineCounter
	rc.AddHook(&pc)
	b := newBatcher(rc, 1, 64, 5*time.Second, nil)
	key := prefix + ":n"

	const calls = 40
	release := make(chan struct{})
	replies := make([]int64, calls)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c *redis.IntCmd
		b.do(context.Background(), func(ctx context.Context, p redis.Pipeliner) {
			<-release // the first pipeline is slow to leave: the others queue meanwhile
			c = p.Incr(ctx, key)
		})
		replies[0] = c.Val()
	}()
	testenv.WaitFor(t, 10*time.Second, "the first pipeline in flight", func() bool { return b.share.InFlight() == 1 })
	for i := 1; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c *redis.IntCmd
			b.do(context.Background(), func(ctx context.Context, p redis.Pipeliner) { c = p.Incr(ctx, key) })
			if err := c.Err(); err != nil {
				t.Error(err)
			}
			replies[i] = c.Val()
		}()
	}
	testenv.WaitFor(t, 10*time.Second, "the other calls queued", func() bool { return b.share.Waiting() == calls-1 })
	close(release)
	wg.Wait()

	if got := pc.n.Load(); got != 2 {
		t.Errorf("%d pipelines for %d calls, want 2", got, calls)
	}
	slices.Sort(replies)
	for i, r := range replies {
		if r != int64(i+1) {
			t.Fatalf("replies %v: each call must get its own INCR reply", replies)
		}
	}
}

// With more waiting calls than fit in one pipeline, the lead passes from call to call until
// none is left (none is stranded), and a call's commands reach Redis together and in order.
// Broken variant tried: a leader that frees its slot without handing the lead on strands
// the calls beyond the first pipeline (the test times out).
func TestBatcherKeepsCallsWholeAndDrainsEveryone(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	b := newBatcher(rc, 2, 4, 5*time.Second, nil)
	list := prefix + ":log"
	const calls = 200
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first, second *redis.IntCmd
			b.do(context.Background(), func(ctx context.Context, p redis.Pipeliner) {
				first = p.RPush(ctx, list, fmt.Sprintf("%d-a", i))
				second = p.RPush(ctx, list, fmt.Sprintf("%d-b", i))
			})
			if first.Err() != nil || second.Err() != nil {
				t.Errorf("call %d: %v %v", i, first.Err(), second.Err())
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("calls stranded: the lead was not handed on")
	}
	got, err := rc.LRange(context.Background(), list, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*calls {
		t.Fatalf("%d entries, want %d", len(got), 2*calls)
	}
	for i := 0; i < len(got); i += 2 {
		var a, c int
		var sa, sc string
		fmt.Sscanf(got[i], "%d-%s", &a, &sa)
		fmt.Sscanf(got[i+1], "%d-%s", &c, &sc)
		if a != c || sa != "a" || sc != "b" {
			t.Fatalf("entries %d,%d = %q,%q: a call's commands were split or reordered", i, i+1, got[i], got[i+1])
		}
	}
	if n, w := b.share.InFlight(), b.share.Waiting(); n != 0 || w != 0 {
		t.Errorf("%d pipelines in flight, %d calls waiting after every call returned", n, w)
	}
}
