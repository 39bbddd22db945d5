package lockhandoff

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/pipeshare"
	"github.com/junban/junban/internal/redis/replication"
)

// batcher sends the scripts of concurrent turns (takes, handoffs, leaves) to Redis in shared
// pipelines (pipeshare.Batcher: a call that finds fewer than slots pipelines in flight goes
// out at once, alone; otherwise it shares the next). Under load the scripts of many
// entities then cost Redis and this process one write and one read together instead of
// one each: on the two cores of a shared machine those system calls, not the scripts, are
// most of the cost of a turn.
//
// Each script still runs atomically on its own keys; sharing a pipeline changes when a
// command is sent, not what it does. A call's commands stay together and in order (a
// take and its index entry); on a cluster client go-redis splits a pipeline by node and
// keeps the order per node.
//
// A call that must be acknowledged by replicas (a take, with wait on) is covered by one
// WAIT at the end of its pipeline: WAIT counts the writes made on its own connection, all
// of the pipeline's. A cluster client splits a pipeline by node and sends a keyless
// command to any node, so there such calls go out in a pipeline of their own per primary
// (on the client ClusterClient.MasterForKey gives), each ending with its WAIT, beside
// the cluster pipeline of the rest.
type batcher struct {
	rc    redis.UniversalClient
	wait  *replication.Waiter
	share *pipeshare.Batcher[*pipeCall]
}

// call is one caller's commands.
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
}

// newBatcher returns a batcher of at most slots pipelines in flight, each of at most max
// calls and bounded by timeout (it runs even when callers' contexts end).
func newBatcher(rc redis.UniversalClient, slots, max int, timeout time.Duration, wait *replication.Waiter) *batcher {
	b := &batcher{rc: rc, wait: wait}
	b.share = pipeshare.New(slots, max, timeout, b.exec)
	return b
}

// do runs add's commands in a shared pipeline and returns when their replies are in the
// commands add created (errors included: a failed round trip fails every command in it).
func (b *batcher) do(ctx context.Context, add func(ctx context.Context, p redis.Pipeliner)) {
	b.share.Do(ctx, &pipeCall{add: add})
}

// doDurable is do for writes in key's slot (add) that count as done only once replicas
// acknowledged them, and other commands beside them (other). It returns nil when they
// were acknowledged or wait is off, else why not (the writes may have been made).
func (b *batcher) doDurable(ctx context.Context, key, otherKey string, add, other func(ctx context.Context, p redis.Pipeliner)) error {
	c := &pipeCall{add: add, other: other}
	if b.wait.On() {
		c.durable, c.otherKey = key, otherKey
	}
	b.share.Do(ctx, c)
	return c.acked
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
