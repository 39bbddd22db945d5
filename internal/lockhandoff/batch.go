package lockhandoff

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/replication"
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
//
// A call that must be acknowledged by replicas (a take, with wait on) is covered by one
// WAIT at the end of its pipeline: WAIT counts the writes made on its own connection, all
// of the pipeline's. A cluster client splits a pipeline by node and sends a keyless
// command to any node, so there such calls go out in a pipeline of their own per primary
// (on the client ClusterClient.MasterForKey gives), each ending with its WAIT, beside
// the cluster pipeline of the rest.
type batcher struct {
	rc      redis.UniversalClient
	slots   int           // pipelines in flight at most
	max     int           // calls per pipeline at most
	timeout time.Duration // of one pipeline; it runs even when callers' contexts end
	wait    *replication.Waiter

	mu      sync.Mutex
	busy    int // pipelines in flight or about to be
	pending []*pipeCall
}

// call is one caller's commands. It receives exactly one word on wake: callDone (another
// leader sent it) or callLead (it was removed from pending and must send itself, leading).
type pipeCall struct {
	add func(ctx context.Context, p redis.Pipeliner)
	// other adds the call's commands outside its entity's slot (the backlog index): they
	// follow add's in the same pipeline, except on a cluster client with wait on.
	other func(ctx context.Context, p redis.Pipeliner)
	// durable is a key of the entity when add's writes must be acknowledged by replicas
	// (with wait on); acked is then the WAIT's answer (replication.ErrShort, or why
	// there was none).
	durable string
	// otherKey is a key of other's commands, when they must be acknowledged too (the
	// backlog index entry of a take: lost in a failover, it could orphan the backlog).
	otherKey string
	acked    error
	wake     chan callWake
}

type callWake bool

const (
	callDone callWake = false
	callLead callWake = true
)

func newBatcher(rc redis.UniversalClient, slots, max int, timeout time.Duration, wait *replication.Waiter) *batcher {
	return &batcher{rc: rc, slots: slots, max: max, timeout: timeout, wait: wait}
}

// do runs add's commands in a shared pipeline and returns when their replies are in the
// commands add created (errors included: a failed round trip fails every command in it).
func (b *batcher) do(ctx context.Context, add func(ctx context.Context, p redis.Pipeliner)) {
	b.send(ctx, &pipeCall{add: add})
}

// doDurable is do for writes in key's slot (add) that count as done only once replicas
// acknowledged them, and other commands beside them (other). It returns nil when they
// were acknowledged or wait is off, else why not (the writes may have been made).
func (b *batcher) doDurable(ctx context.Context, key, otherKey string, add, other func(ctx context.Context, p redis.Pipeliner)) error {
	c := &pipeCall{add: add, other: other}
	if b.wait.On() {
		c.durable, c.otherKey = key, otherKey
	}
	b.send(ctx, c)
	return c.acked
}

func (b *batcher) send(ctx context.Context, c *pipeCall) {
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
	b.exec(ectx, batch)
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

// exec sends one batch: in one pipeline, with a WAIT at its end when a call asks for it,
// or, on a cluster client, as execByNode does.
func (b *batcher) exec(ctx context.Context, batch []*pipeCall) {
	durable := false
	for _, c := range batch {
		durable = durable || c.durable != ""
	}
	if cc, ok := b.rc.(*redis.ClusterClient); ok && durable {
		b.execByNode(ctx, cc, batch)
		return
	}
	pipe := b.rc.Pipeline()
	for _, c := range batch {
		c.add(ctx, pipe)
		if c.other != nil {
			c.other(ctx, pipe)
		}
	}
	var ack *replication.Ack
	if durable {
		ack = b.wait.Append(ctx, pipe, "take")
	}
	pipe.Exec(ctx) // each command carries its own reply or error
	if ack != nil {
		err := ack.Err()
		for _, c := range batch {
			if c.durable != "" {
				c.acked = err
			}
		}
	}
}

// execByNode sends the durable calls of a batch in one pipeline per primary, each ending
// with its WAIT (their commands outside the entity's slot in the pipeline of their own
// key's primary, also before its WAIT), and everything else in one cluster pipeline, all
// at once. A call is acknowledged when every primary it wrote to was.
func (b *batcher) execByNode(ctx context.Context, cc *redis.ClusterClient, batch []*pipeCall) {
	type nodeBatch struct {
		adds, others []*pipeCall
		err          error
	}
	groups := map[*redis.Client]*nodeBatch{}
	group := func(key string) (*nodeBatch, error) {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		g := groups[node]
		if g == nil {
			g = &nodeBatch{}
			groups[node] = g
		}
		return g, nil
	}
	written := map[*pipeCall][]*nodeBatch{}
	rest := cc.Pipeline()
	for _, c := range batch {
		if c.durable == "" {
			c.add(ctx, rest)
			if c.other != nil {
				c.other(ctx, rest)
			}
			continue
		}
		if g, err := group(c.durable); err == nil {
			g.adds = append(g.adds, c)
			written[c] = append(written[c], g)
		} else {
			// The writes still go out, through the cluster client; only the WAIT is lost.
			c.add(ctx, rest)
			c.acked = b.wait.Fail("take", err)
		}
		if c.other == nil {
			continue
		}
		if c.otherKey == "" {
			c.other(ctx, rest)
		} else if g, err := group(c.otherKey); err == nil {
			g.others = append(g.others, c)
			written[c] = append(written[c], g)
		} else {
			c.other(ctx, rest)
			c.acked = cmp.Or(c.acked, b.wait.Fail("take", err))
		}
	}
	var wg sync.WaitGroup
	for node, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pipe := node.Pipeline()
			for _, c := range g.adds {
				c.add(ctx, pipe)
			}
			for _, c := range g.others {
				c.other(ctx, pipe)
			}
			ack := b.wait.Append(ctx, pipe, "take")
			if _, err := pipe.Exec(ctx); err != nil {
				// A slot that moved answers MOVED here, where the cluster client cannot
				// follow it: let it learn the new layout.
				cc.ReloadState(ctx)
			}
			g.err = ack.Err()
		}()
	}
	rest.Exec(ctx)
	wg.Wait()
	for c, gs := range written {
		for _, g := range gs {
			c.acked = cmp.Or(c.acked, g.err)
		}
	}
}
