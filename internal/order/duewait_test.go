package order_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/redis/replication"
	"github.com/junban/junban/internal/testenv"
)

// A hold's due entry is durable before the commit that relies on it: on a Redis Cluster
// with one replica required, an order whose due shard lives on another primary than its
// turn, and that shard's replica stopped, a reserve-mode placement (which holds stock
// until its hold ends) does not commit, and publishes nothing, until the due entry is
// acknowledged. Otherwise a failover of the due shard's primary right after the commit
// keeps the hold and loses its entry: the reservation would never expire.
//
// Seen failing with IndexHold's plain ZADD (no WAIT on the due shard's primary): the
// placement committed and its result was published with the shard's replica stopped.
func TestHoldsDueEntryIsReplicatedBeforeTheCommit(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisClusterWithReplicas(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Seed}})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	prefix := testenv.Name(t)
	primary := func(key string) string {
		n, err := rc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	var lcid, duePrimary string
	for i := 0; lcid == ""; i++ {
		id := fmt.Sprintf("DW-%d", i)
		due := primary(order.DueKey(prefix, order.DueShard(id)))
		if due != primary(lockhandoff.Key(prefix, id, "lock")) {
			lcid, duePrimary = id, due
		}
	}
	w, err := replication.New(replication.Config{Replicas: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const sku = "DW"
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: catalog{sku: {SKU: sku, Version: 1, Lots: []stock.Lot{onHand("DW1", 1, 10, "2027-01-01")}}}})
	if err != nil {
		t.Fatal(err)
	}
	pub := &discard{}
	proc, err := order.New(order.Config{Redis: rc, Ledger: led, Publisher: pub, Prefix: prefix, Replication: w,
		Policy: domain.Policy{ReservationTTL: time.Hour}, DeadLetter: func(context.Context, []byte, string, map[string]string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	const token = "token-1"
	if err := rc.Set(ctx, lockhandoff.Key(prefix, lcid, "lock"), token, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	published := func() int {
		pub.mu.Lock()
		defer pub.mu.Unlock()
		return pub.n
	}

	replica := cl.Replica[duePrimary]
	replica.Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			replica.Resume(t)
		}
	}()
	body := mustJSON(t, placed(lcid, stock.ModeReserve, line("1", sku, 2)))
	_, err = proc.Step(ctx, lockhandoff.Turn{Entity: lcid, Seq: 1, Token: token}, body)
	if !errors.Is(err, replication.ErrShort) {
		t.Errorf("placement with the due shard's replica stopped: %v, want %v", err, replication.ErrShort)
	}
	if n := published(); n != 0 {
		t.Fatalf("%d results published before the due entry was acknowledged", n)
	}
	replica.Resume(t)
	resumed = true
	testenv.WaitFor(t, 30*time.Second, "the placement once the replica is back", func() bool {
		_, err := proc.Step(ctx, lockhandoff.Turn{Entity: lcid, Seq: 1, Token: token}, body)
		return err == nil
	})
	if n := published(); n != 1 {
		t.Errorf("%d results published, want 1", n)
	}
	if s, err := rc.ZScore(ctx, order.DueKey(prefix, order.DueShard(lcid)), lcid).Result(); err != nil || s == 0 {
		t.Errorf("due entry of %s: %v %v", lcid, s, err)
	}
}
