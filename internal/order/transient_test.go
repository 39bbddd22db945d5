package order_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
)

// A ledger that fails for a moment (Redis unreachable, a pool or read timeout) must not
// reject the event: the handler fails, the event stays in proc, nothing is published, and
// the sweeper's re-run with a working ledger applies it.
//
// Broken variant tried: rejectable treating stock.Reason's "ERR_INTERNAL" (any error
// that is not the ledger's) as a reason: the order was published rejected.
func TestTransientLedgerErrorIsNoRejection(t *testing.T) {
	skus := []stock.SKU{{SKU: "A", Version: 1, Lots: []stock.Lot{onHand("L1", 1, 10, "2027-01-01")}}}
	h := newHarness(t, skus)
	prefix := h.prefix + "-broken"
	away := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { away.Close() })
	awayLedger, err := ledger.New(ledger.Config{Redis: away, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := order.New(order.Config{Redis: h.rc, Ledger: awayLedger, Publisher: h.pub, Registerer: prometheus.NewRegistry(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := lockhandoff.New(lockhandoff.Config{Redis: h.rc, Prefix: prefix, HandlerRetries: 1, RetryBackoff: time.Millisecond, Handler: broken, NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = turns.Stop(context.Background()) })
	e := placed("T1", stock.ModeReserve, line("1", "A", 2))
	body, _ := json.Marshal(e)
	if _, err := turns.Submit(context.Background(), "T1", body); err != nil {
		t.Fatal(err)
	}
	if n := h.pub.count(e.EventID); n != 0 {
		t.Fatalf("%d results published while the ledger was away", n)
	}
	if n := h.rc.LLen(context.Background(), lockhandoff.Key(prefix, "T1", "proc")).Val(); n != 1 {
		t.Fatalf("proc holds %d envelopes, want the failed one", n)
	}
	if n := h.rc.Exists(context.Background(), lockhandoff.Key(prefix, "T1", "state")).Val(); n != 0 {
		t.Fatal("the order was committed while the ledger was away")
	}

	// The ledger is back: the sweeper's re-run applies the event.
	fixed, err := order.New(order.Config{Redis: h.rc, Ledger: h.led, Publisher: h.pub, Registerer: prometheus.NewRegistry(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	turns2, err := lockhandoff.New(lockhandoff.Config{Redis: h.rc, Prefix: prefix, Handler: fixed, NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = turns2.Stop(context.Background()) })
	if _, err := turns2.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.collect(1)
	if r := h.result(e.EventID); r.Outcome != event.Applied {
		t.Errorf("after the re-run: %s %s, want applied", r.Outcome, r.Reason)
	}
}
