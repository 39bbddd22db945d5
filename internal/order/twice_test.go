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
// Broken variant tried: ack.lua trimming by its count alone (LTRIM key n -1): the outbox
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
	ok, err := order.AckOutbox(ctx, rc, lock, outbox, "tok", results[:2])
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
// event done ({0}) and the step publishes what the first run put in the outbox, so the
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
	// The outbox's trim commits with the turn's next step.
	for _, tr := range res.Trims {
		if tr.N != 1 {
			t.Errorf("trim %+v, want the one result", tr)
		}
	}
}

// noTurns is a scanner's Turns that a test never reaches.
type noTurns struct{ t *testing.T }

func (n noTurns) Submit(context.Context, string, []byte) (lockhandoff.Outcome, error) {
	n.t.Error("a claim submitted an expiry")
	return 0, nil
}

func (n noTurns) Resume(context.Context, string) error { return nil }

// A claim of due entries whose reply is lost is sent again by the client: the second run
// finds the entries the first claimed scored a lease ahead, not due, and claims none of
// them again; they are claimed again once the lease is over. A lost reply costs its
// entries one lease, never a second claim.
//
// Broken variant tried: due.lua returning the due entries without moving their score:
// the second run claimed the entry again. (A due.lua that gave a retry its claims back, by
// the claim's own score, let two scanners with one clock both claim every entry in
// TestExpiryOnceWithTwoScannersRacing: not kept.)
func TestDueClaimTwiceClaimsNothingAgain(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(order.DueHash))
	rc := testenv.RedisVia(t, d.Addr())
	ctx := context.Background()
	now := time.Now()
	const lcid = "DUE-twice"
	shard := order.DueShard(lcid)
	if err := order.IndexHold(ctx, rc, prefix, lcid, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	s, err := order.NewScanner(order.ScannerConfig{Redis: rc, Turns: noTurns{t}, Prefix: prefix, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got, err := order.Claim(ctx, s, shard, now)
	if err != nil {
		t.Fatal(err)
	}
	if d.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", d.Dropped())
	}
	if len(got) != 0 {
		t.Fatalf("the second run claimed %q again", got)
	}
	score, err := rc.ZScore(ctx, order.DueKey(prefix, shard), lcid).Result()
	if err != nil || int64(score) != now.Add(time.Hour).UnixMicro() {
		t.Fatalf("entry's score %d (%v), want the first run's claim %d", int64(score), err, now.Add(time.Hour).UnixMicro())
	}
	if again, err := order.Claim(ctx, s, shard, now.Add(time.Minute)); err != nil || len(again) != 0 {
		t.Fatalf("a scan in the lease claimed %q (%v), want nothing", again, err)
	}
	after := now.Add(time.Hour + time.Second)
	if again, err := order.Claim(ctx, s, shard, after); err != nil || !slices.Equal(again, []string{lcid}) {
		t.Fatalf("a scan after the lease claimed %q (%v), want [%s]", again, err, lcid)
	}
}
