package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/replication"
	"github.com/junban/junban/internal/testenv"
)

func newWaiter(t *testing.T, replicas int) *replication.Waiter {
	t.Helper()
	w, err := replication.New(replication.Config{Replicas: replicas, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitCalls is how many WAITs the server ran since its stats were reset.
func waitCalls(t *testing.T, rc *redis.Client) int {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_wait:calls="); ok {
			var n int
			fmt.Sscanf(v, "%d", &n)
			return n
		}
	}
	return 0
}

// With one replica required, a take counts only once the replica acknowledged it: with
// the replica stopped, Submit fails (a queued envelope and a taken turn alike, the turn
// left unrun with its envelope in proc), and succeeds again once it is back. With none
// required, no WAIT is sent at all.
//
// Broken variant tried: doDurable sending no WAIT (Submit succeeded with the replica
// stopped).
func TestTakeWaitsForTheReplica(t *testing.T) {
	t.Parallel()
	primary, replica := testenv.RedisWithReplica(t)
	rc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { rc.Close() })
	prefix := testenv.Name(t)
	ctx := context.Background()

	// Off: no WAIT reaches the server.
	off, _ := newTestHandoff(t, rc, prefix+"-off", Config{Replication: newWaiter(t, 0)}, func(context.Context, Turn, []byte) error { return nil })
	rc.ConfigResetStat(ctx)
	for i := range 5 {
		if _, err := off.Submit(ctx, fmt.Sprintf("LC-off-%d", i), []byte("e")); err != nil {
			t.Fatal(err)
		}
	}
	<-off.Idle()
	if n := waitCalls(t, rc); n != 0 {
		t.Fatalf("%d WAITs sent with no replica required", n)
	}

	ran := newRecorder()
	hd, _ := newTestHandoff(t, rc, prefix, Config{Replication: newWaiter(t, 1)}, func(_ context.Context, turn Turn, env []byte) error {
		ran.add(turn, env)
		return nil
	})
	if out, err := hd.Submit(ctx, "LC-up", []byte("e0")); out != OutcomeTurn || err != nil {
		t.Fatalf("replica up: %v %v", out, err)
	}
	if n := waitCalls(t, rc); n == 0 {
		t.Fatal("no WAIT sent with a replica required")
	}
	// A turn held elsewhere, so that the next takes queue.
	holder, release := holdTurn(t, rc, prefix, "LC-q")

	replica.Pause(t)
	out, err := hd.Submit(ctx, "LC-q", []byte("e1"))
	if !errors.Is(err, replication.ErrShort) {
		t.Fatalf("queued with the replica stopped: %v %v, want ErrShort", out, err)
	}
	before := len(ran.snapshot())
	out, err = hd.Submit(ctx, "LC-turn", []byte("e2"))
	if !errors.Is(err, replication.ErrShort) {
		t.Fatalf("turn taken with the replica stopped: %v %v, want ErrShort", out, err)
	}
	k := hd.keys("LC-turn")
	if n := rc.Exists(ctx, k.lock).Val(); n != 0 {
		t.Error("the turn taken with the replica stopped was kept")
	}
	if p := rc.LRange(ctx, k.proc, 0, -1).Val(); len(p) != 1 || payloads(p)[0] != "e2" {
		t.Errorf("proc %q, want e2 left for its redelivery", p)
	}
	if len(ran.snapshot()) != before {
		t.Error("a turn whose take was not replicated ran its handler")
	}

	replica.Resume(t)
	if out, err := hd.Submit(ctx, "LC-q", []byte("e1")); out != OutcomeQueued || err != nil {
		t.Fatalf("queued with the replica back: %v %v", out, err)
	}
	if out, err := hd.Submit(ctx, "LC-turn", []byte("e2")); out != OutcomeTurn || err != nil {
		t.Fatalf("redelivery with the replica back: %v %v", out, err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-holder.Idle()
	<-hd.Idle()
	// The redelivery ran e2 from proc first, then its own copy: the handler is idempotent.
	var e2 int
	for _, e := range ran.envelopes() {
		if e == "e2" {
			e2++
		}
	}
	if e2 != 2 {
		t.Errorf("e2 ran %d times, want 2 (the envelope left in proc, and its redelivery)", e2)
	}
}

// On a Redis Cluster each take's WAIT goes to the primary that ran its script, on the
// same connection: with one primary's replica stopped, the takes of its entities fail and
// those of the other primaries' entities, sent at the same time, succeed.
//
// Broken variant tried: the durable calls sent in the cluster pipeline with a WAIT added
// to it (go-redis sent the keyless WAIT to one node: the takes on the stopped replica's
// primary succeeded).
func TestClusterTakeWaitsForItsOwnPrimary(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisClusterWithReplicas(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Seed}})
	t.Cleanup(func() { rc.Close() })
	prefix := testenv.Name(t)
	ctx := context.Background()
	hd, _ := newTestHandoff(t, rc, prefix, Config{Replication: newWaiter(t, 1)}, func(context.Context, Turn, []byte) error { return nil })

	// Entities by the primary that holds their slot.
	byNode := map[string][]string{}
	for i := 0; len(byNode) < 3 || i < 60; i++ {
		e := fmt.Sprintf("LC-%d", i)
		node, err := rc.MasterForKey(ctx, Key(prefix, e, "lock"))
		if err != nil {
			t.Fatal(err)
		}
		byNode[node.Options().Addr] = append(byNode[node.Options().Addr], e)
	}
	var stopped string
	for addr := range byNode {
		stopped = addr
		break
	}
	cl.Replica[stopped].Pause(t)
	defer cl.Replica[stopped].Resume(t)

	// A take writes its backlog index entry too, which must be acknowledged as well: a take
	// whose index shard lives on the stopped replica's primary is short too.
	shardNode := func(e string) string {
		n, err := rc.MasterForKey(ctx, hd.indexShard(e))
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	type answer struct {
		node string
		err  error
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	for node, ents := range byNode {
		for _, e := range ents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := hd.Submit(ctx, e, []byte("e"))
				n := node
				if shardNode(e) == stopped {
					n = stopped
				}
				mu.Lock()
				answers = append(answers, answer{n, err})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, a := range answers {
		switch {
		case a.node == stopped && !errors.Is(a.err, replication.ErrShort):
			t.Errorf("take on %s, whose replica is stopped: %v, want ErrShort", a.node, a.err)
		case a.node != stopped && a.err != nil:
			t.Errorf("take on %s: %v", a.node, a.err)
		}
	}
	cl.Replica[stopped].Resume(t)
	for _, e := range slices.Concat(slices.Collect(maps.Values(byNode))...) {
		if _, err := hd.Submit(ctx, e, []byte("e")); err != nil {
			t.Errorf("%s with the replica back: %v", e, err)
		}
	}
}
