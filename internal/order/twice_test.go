package order_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// TestAckTwiceDropsNothingUnpublished runs ack.lua through a proxy that lets Redis run it
// and drops the reply: go-redis sends it again, and the second run must not drop the
// results behind the acknowledged ones, which were never published.
//
// Broken variant tried: ack.lua trimming by its count alone (LTRIM key n -1): the results list
// was [r5], not [r3 r4 r5].
func TestAckTwiceDropsNothingUnpublished(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(order.AckHash))
	rc := testenv.RedisVia(t, d.Addr())
	ctx := context.Background()
	lock, outbox := prefix+"{o1}:lock", prefix+"{o1}:outbox"
	if err := rc.Set(ctx, lock, "tok", 0).Err(); err != nil {
		t.Fatal(err)
	}
	results := []string{"r1", "r2", "r3", "r4", "r5"}
	if err := rc.RPush(ctx, outbox, results).Err(); err != nil {
		t.Fatal(err)
	}
	ok, err := order.AckResults(ctx, rc, lock, outbox, "tok", results[:2])
	if err != nil || !ok {
		t.Fatalf("ack: ok %v, err %v", ok, err)
	}
	if d.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", d.Dropped())
	}
	left, err := rc.LRange(ctx, outbox, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, results[2:]) {
		t.Fatalf("outbox after an ack run twice: %q, want %q", left, results[2:])
	}
}

// A commit whose reply is lost is sent again by the client: the second run finds the
// event done ({0}) and the step publishes what the first run put in the results list, so the
// stock moves once and the result is published once.
//
// Broken variant tried: commit.lua without its done check: 2 results published.
func TestCommitTwiceAppliesOnce(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(order.CommitHash))
	rc := testenv.RedisVia(t, d.Addr())
	ctx := context.Background()
	const sku, lcid, token = "TW", "TW-1", "token-1"
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: catalog{sku: {SKU: sku, Version: 1, Lots: []stock.Lot{onHand("TW1", 1, 10, "2027-01-01")}}}})
	if err != nil {
		t.Fatal(err)
	}
	pub := &discard{}
	proc, err := order.New(order.Config{Redis: rc, Ledger: led, Publisher: pub, Prefix: prefix,
		DeadLetter: func(context.Context, []byte, string, map[string]string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, lockhandoff.Key(prefix, lcid, "lock"), token, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := proc.Step(ctx, lockhandoff.Turn{Entity: lcid, Seq: 1, Token: token}, mustJSON(t, placed(lcid, stock.ModeReserve, line("1", sku, 2))))
	if err != nil {
		t.Fatal(err)
	}
	if d.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", d.Dropped())
	}
	snap, err := led.Snapshot(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if b := totals(snap); b.reserved != 2 {
		t.Errorf("%d units reserved, want 2", b.reserved)
	}
	pub.mu.Lock()
	n := pub.n
	pub.mu.Unlock()
	if n != 1 {
		t.Errorf("%d results published, want 1", n)
	}
	// The results list's trim commits with the turn's next step.
	for _, tr := range res.Trims {
		if tr.N != 1 {
			t.Errorf("trim %+v, want the one result", tr)
		}
	}
}
