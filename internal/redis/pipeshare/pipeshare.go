// Package pipeshare sends the Redis commands of concurrent callers in shared round trips,
// without a timer. A call that finds fewer than a bound of round trips in flight yields
// once to the goroutines already runnable, so that those about to send a call of their
// own (the other events of the same receive) join it, and goes out: no added latency
// beyond theirs while the load is light. Otherwise it waits, and whichever round trip
// returns first sends every call that waited meanwhile in one pipeline. A round trip costs
// Redis and the client far more than a command that shares one, so sharing is where an
// event's Redis time goes down (docs/performance.md, "Decisions kept").
//
// Batcher is the mechanism, for any kind of call; Client applies it to single commands,
// for the callers that name it instead of a plain client (lockhandoff applies Batcher to its
// own scripts, with the replicas' acknowledgement they need).
package pipeshare

import (
	"context"
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

// Client sends single commands in pipelines shared by concurrent callers, on exec, through
// a Batcher: its methods have go-redis's signatures, so that a caller that names a Client
// where it would name a plain client (a small interface of its own) sends those commands
// through shared round trips, and the rest of its commands (pipelines, WAIT, scans over a
// cluster's nodes) on its plain client.
//
// Every command runs atomically and gets its own reply or error, as alone; what changes is
// when it is sent, and that a caller waits for its whole pipeline's replies. A blocking
// command (BLPOP, XREAD BLOCK, WAIT) would hold every call queued behind it: it must not go
// through a Client, and a connection-scoped one (WAIT after a write) would count another
// connection's writes.
type Client struct {
	exec redis.UniversalClient
	b    *Batcher[call]
	// builders are pipelines of exec that are never sent: go-redis's own methods build
	// the commands (their arguments, a script's key position), which then go in a batch.
	builders sync.Pool
}

// call is one command and its caller's context: a command whose caller gave up before
// its pipeline left is not sent, as go-redis does not send one whose context has ended.
type call struct {
	ctx context.Context
	cmd redis.Cmder
}

// NewClient returns a Client that sends its commands in pipelines of exec, at most slots in
// flight, each of at most size commands and bounded by timeout.
func NewClient(exec redis.UniversalClient, slots, size int, timeout time.Duration) *Client {
	c := &Client{exec: exec}
	c.builders.New = func() any { return exec.Pipeline() }
	c.b = New(slots, size, timeout, func(ctx context.Context, calls []call) {
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
	})
	return c
}

// Process sends cmd in a shared pipeline and returns its own error; a command whose
// context ended while it waited fails with the context's error, unsent.
func (c *Client) Process(ctx context.Context, cmd redis.Cmder) error {
	c.b.Do(ctx, call{ctx, cmd})
	return cmd.Err()
}

// Waiting is the number of commands waiting for a pipeline.
func (c *Client) Waiting() int { return c.b.Waiting() }

// send builds a command with build (on a pipeline that is never sent) and sends it.
func send[C redis.Cmder](ctx context.Context, c *Client, build func(p redis.Pipeliner) C) C {
	p := c.builders.Get().(redis.Pipeliner)
	cmd := build(p)
	p.Discard()
	c.builders.Put(p)
	_ = c.Process(ctx, cmd)
	return cmd
}

// Eval, EvalSha, EvalRO and EvalShaRO are go-redis's (redis.Scripter), in shared round
// trips: Script.Run and RunRO take a Client.
func (c *Client) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.Cmd { return p.Eval(ctx, script, keys, args...) })
}

// EvalSha: see Eval.
func (c *Client) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, sha1, keys, args...) })
}

// EvalRO: see Eval.
func (c *Client) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.Cmd { return p.EvalRO(ctx, script, keys, args...) })
}

// EvalShaRO: see Eval.
func (c *Client) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.Cmd { return p.EvalShaRO(ctx, sha1, keys, args...) })
}

// ScriptExists and ScriptLoad complete redis.Scripter. They go on exec, alone: a cluster
// client sends them to every primary, which a keyless command in a pipeline would not.
func (c *Client) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return c.exec.ScriptExists(ctx, hashes...)
}

// ScriptLoad: see ScriptExists.
func (c *Client) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return c.exec.ScriptLoad(ctx, script)
}

// Get and the commands below are go-redis's, in shared round trips.
func (c *Client) Get(ctx context.Context, key string) *redis.StringCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.StringCmd { return p.Get(ctx, key) })
}

// MGet: see Get.
func (c *Client) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.SliceCmd { return p.MGet(ctx, keys...) })
}

// HGet: see Get.
func (c *Client) HGet(ctx context.Context, key, field string) *redis.StringCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.StringCmd { return p.HGet(ctx, key, field) })
}

// HGetAll: see Get.
func (c *Client) HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.MapStringStringCmd { return p.HGetAll(ctx, key) })
}

// LLen: see Get.
func (c *Client) LLen(ctx context.Context, key string) *redis.IntCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.IntCmd { return p.LLen(ctx, key) })
}

// LRange: see Get.
func (c *Client) LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.StringSliceCmd { return p.LRange(ctx, key, start, stop) })
}

// ZAdd: see Get.
func (c *Client) ZAdd(ctx context.Context, key string, members ...redis.Z) *redis.IntCmd {
	return send(ctx, c, func(p redis.Pipeliner) *redis.IntCmd { return p.ZAdd(ctx, key, members...) })
}

// ZScan: see Get. It is built here, as go-redis builds it, because its iterator sends the
// next pages with the process it was built with: this Client's.
func (c *Client) ZScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd {
	args := []any{"zscan", key, cursor}
	if match != "" {
		args = append(args, "match", match)
	}
	if count > 0 {
		args = append(args, "count", count)
	}
	cmd := redis.NewScanCmd(ctx, c.Process, args...)
	_ = c.Process(ctx, cmd)
	return cmd
}
