package lockhandoff

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends the scripts of concurrent turns (takes, handoffs, leaves) to Redis in shared
// pipelines. A call whose commands find fewer than slots pipelines in flight goes out at
// once, in a pipeline of its own: no added latency while the load is light. Otherwise it
// waits, and whichever pipeline returns first sends every call that waited meanwhile (up to
// max) in one round trip. Under load the scripts of many entities then cost Redis and this
// process one write and one read together instead of one each: on the two cores of a shared
// machine those system calls, not the scripts, are most of the cost of a turn.
//
// Each script still runs atomically on its own keys; sharing a pipeline changes when a
// command is sent, not what it does. A call's commands stay together and in order (a
// take and its index entry); on a cluster client go-redis splits a pipeline by node and
// keeps the order per node.
//
// There is no goroutine of its own: the caller that finds a free slot leads, and hands the
// lead on to the oldest waiting call when others are left after its round trip.
type batcher struct {
	rc      redis.UniversalClient
	slots   int           // pipelines in flight at most
	max     int           // calls per pipeline at most
	timeout time.Duration // of one pipeline; it runs even when callers' contexts end

	mu      sync.Mutex
	busy    int // pipelines in flight or about to be
	pending []*pipeCall
}

// call is one caller's commands. It receives exactly one word on wake: callDone (another
// leader sent it) or callLead (it was removed from pending and must send itself, leading).
type pipeCall struct {
	add  func(ctx context.Context, p redis.Pipeliner)
	wake chan callWake
}

type callWake bool

const (
	callDone callWake = false
	callLead callWake = true
)

func newBatcher(rc redis.UniversalClient, slots, max int, timeout time.Duration) *batcher {
	return &batcher{rc: rc, slots: slots, max: max, timeout: timeout}
}

// do runs add's commands in a shared pipeline and returns when their replies are in the
// commands add created (errors included: a failed round trip fails every command in it).
func (b *batcher) do(ctx context.Context, add func(ctx context.Context, p redis.Pipeliner)) {
	c := &pipeCall{add: add}
	b.mu.Lock()
	if b.busy < b.slots {
		b.busy++
		b.mu.Unlock()
		b.lead(ctx, c)
		return
	}
	c.wake = make(chan callWake, 1)
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	if <-c.wake == callLead {
		b.lead(ctx, c)
	}
}

// lead sends first and as many waiting calls as fit in one pipeline, wakes them, and then
// hands the slot on to the oldest call still waiting, or frees it.
func (b *batcher) lead(ctx context.Context, first *pipeCall) {
	b.mu.Lock()
	n := min(len(b.pending), b.max-1)
	batch := make([]*pipeCall, 0, n+1)
	batch = append(batch, first)
	batch = append(batch, b.pending[:n]...)
	b.pending = b.pending[n:]
	b.mu.Unlock()

	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	pipe := b.rc.Pipeline()
	for _, c := range batch {
		c.add(ectx, pipe)
	}
	pipe.Exec(ectx) // each command carries its own reply or error
	cancel()
	for _, c := range batch[1:] {
		c.wake <- callDone
	}

	b.mu.Lock()
	if len(b.pending) == 0 {
		b.busy--
		b.pending = nil // let the backing array go
		b.mu.Unlock()
		return
	}
	next := b.pending[0]
	b.pending = b.pending[1:]
	b.mu.Unlock()
	next.wake <- callLead
}
