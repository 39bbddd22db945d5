package expiry_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/expiry"
	"github.com/junban/junban/internal/testenv"
)

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
	d := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(expiry.DueHash))
	rc := testenv.RedisVia(t, d.Addr())
	ctx := context.Background()
	now := time.Now()
	const lcid = "DUE-twice"
	shard := order.DueShard(lcid)
	if err := order.IndexHold(ctx, rc, prefix, lcid, now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	s, err := expiry.NewScanner(expiry.ScannerConfig{Redis: rc, Turns: noTurns{t}, Prefix: prefix, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	got, err := expiry.Claim(ctx, s, shard, now)
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
	if again, err := expiry.Claim(ctx, s, shard, now.Add(time.Minute)); err != nil || len(again) != 0 {
		t.Fatalf("a scan in the lease claimed %q (%v), want nothing", again, err)
	}
	after := now.Add(time.Hour + time.Second)
	if again, err := expiry.Claim(ctx, s, shard, after); err != nil || !slices.Equal(again, []string{lcid}) {
		t.Fatalf("a scan after the lease claimed %q (%v), want [%s]", again, err, lcid)
	}
}
