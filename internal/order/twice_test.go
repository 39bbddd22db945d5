package order_test

import (
	"context"
	"slices"
	"testing"

	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// TestAckTwiceDropsNothingUnpublished runs ack.lua through a proxy that lets Redis run it
// and drops the reply: go-redis sends it again, and the second run must not drop the
// results behind the acknowledged ones, which were never published.
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
