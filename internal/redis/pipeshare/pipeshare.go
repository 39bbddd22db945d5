// Package pipeshare sends the Redis commands of concurrent callers in shared round trips,
// without a timer. A call that finds fewer than a bound of round trips in flight yields
// once to the goroutines already runnable, so that those about to send a call of their
// own (the other events of the same receive) join it, and goes out: no added latency
// beyond theirs while the load is light. Otherwise it waits, and whichever round trip
// returns first sends every call that waited meanwhile in one pipeline. A round trip costs
// Redis and the client far more than a command that shares one, so sharing is where an
// event's Redis time goes down (docs/performance.md, "Decisions kept").
//
// Batcher is the mechanism, for any kind of call; Hook applies it to every single command
// of a go-redis client (lockhandoff applies it to its own scripts, with the replicas'
// acknowledgement they need).
package pipeshare

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Batcher runs the calls of concurrent callers in shared batches: at most slots batches in
// flight, each of at most size calls. It has no goroutine of its own: the caller that finds
// a free slot leads (after yielding once, runtime.Gosched), and hands the lead on to the
// oldest waiting call when others are left after its batch.
type Batcher[T any] struct {
	slots, size int
	timeout     time.Duration
	exec        func(ctx context.Context, batch []T)

	mu      sync.Mutex
	busy    int // batches in flight or about to be
	pending []*waiter[T]
}

// waiter is a call that waits. It receives exactly one word: false when another leader
// ran it, true when it was taken from pending and must run itself, leading.
type waiter[T any] struct {
	call T
	wake chan bool
}

// New returns a Batcher that runs batches with exec. exec gets the leading call's context
// without its cancellation, bounded by timeout: a batch carries other callers' calls, and
// runs whole whatever becomes of the leader's.
func New[T any](slots, size int, timeout time.Duration, exec func(ctx context.Context, batch []T)) *Batcher[T] {
	return &Batcher[T]{slots: max(slots, 1), size: max(size, 1), timeout: timeout, exec: exec}
}

// Do runs call in a batch and returns once that batch ran.
func (b *Batcher[T]) Do(ctx context.Context, call T) {
	b.mu.Lock()
	if b.busy < b.slots {
		b.busy++
		b.mu.Unlock()
		// The goroutines already runnable (other handlers of the same receive, woken
		// together) run up to their own calls before this one leaves, and share its
		// batch. With nothing else runnable this returns at once: it is no timer.
		runtime.Gosched()
		b.lead(ctx, call)
		return
	}
	w := &waiter[T]{call: call, wake: make(chan bool, 1)}
	b.pending = append(b.pending, w)
	b.mu.Unlock()
	if <-w.wake {
		b.lead(ctx, call)
	}
}

// lead runs first and as many waiting calls as fit in one batch, wakes them, and then
// hands the slot on to the oldest call still waiting, or frees it.
func (b *Batcher[T]) lead(ctx context.Context, first T) {
	b.mu.Lock()
	n := min(len(b.pending), b.size-1)
	waiting := b.pending[:n:n]
	b.pending = b.pending[n:]
	b.mu.Unlock()

	batch := make([]T, 0, n+1)
	batch = append(batch, first)
	for _, w := range waiting {
		batch = append(batch, w.call)
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	b.exec(ectx, batch)
	cancel()
	for _, w := range waiting {
		w.wake <- false
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
	next.wake <- true
}

// InFlight is the number of batches in flight, and Waiting the number of calls waiting
// for one.
func (b *Batcher[T]) InFlight() int { b.mu.Lock(); defer b.mu.Unlock(); return b.busy }

// Waiting: see InFlight.
func (b *Batcher[T]) Waiting() int { b.mu.Lock(); defer b.mu.Unlock(); return len(b.pending) }

// Hook is a go-redis hook that sends every single command of the client it is added to
// through a Batcher, in pipelines of a second client to the same Redis (exec). Pipelines
// of the hooked client pass through unchanged.
//
// The second client is what keeps it from deadlocking: go-redis sends a new connection's
// handshake through its client's hooks, so a hook that ran its pipelines on its own client
// could wait for a handshake queued behind the very pipeline that needs the connection.
//
// Every command runs atomically and gets its own reply or error, as alone; what changes is
// when it is sent, and that a caller waits for its whole pipeline's replies. A blocking
// command (BLPOP, XREAD BLOCK, WAIT outside a pipeline) would hold every call queued behind
// it: a client that sends them must not have this hook.
type Hook struct {
	b *Batcher[hookCall]
}

// hookCall is one command and its caller's context: a command whose caller gave up before
// its pipeline left is not sent, as go-redis does not send one whose context has ended.
type hookCall struct {
	ctx context.Context
	cmd redis.Cmder
}

// ErrSameClient is Install's answer when exec is the hooked client itself.
var ErrSameClient = errors.New("pipeshare: exec must be a client of its own, not the hooked one")

// Install adds a Hook to rc that runs rc's single commands in pipelines of exec (a second
// client to the same Redis, with no Hook of its own), at most slots in flight, each of at
// most size commands and bounded by timeout.
func Install(rc, exec redis.UniversalClient, slots, size int, timeout time.Duration) (*Hook, error) {
	if rc == exec {
		return nil, ErrSameClient
	}
	h := &Hook{b: New(slots, size, timeout, func(ctx context.Context, calls []hookCall) {
		pipe := exec.Pipeline()
		for _, c := range calls {
			if err := c.ctx.Err(); err != nil {
				c.cmd.SetErr(err)
				continue
			}
			_ = pipe.Process(ctx, c.cmd)
		}
		if pipe.Len() > 0 {
			_, _ = pipe.Exec(ctx) // each command carries its own reply or error
		}
	})}
	rc.AddHook(h)
	return h, nil
}

// DialHook leaves dialling as it is.
func (h *Hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook sends cmd in a shared pipeline and returns its own error; a command whose
// context ended while it waited fails with the context's error, unsent.
func (h *Hook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.b.Do(ctx, hookCall{ctx, cmd})
		return cmd.Err()
	}
}

// ProcessPipelineHook leaves the hooked client's own pipelines as they are.
func (h *Hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Waiting is the number of commands waiting for a pipeline.
func (h *Hook) Waiting() int { return h.b.Waiting() }
