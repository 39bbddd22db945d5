package order_test

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/order"
)

// A step whose turn a take started on its event decides from the done marker and state
// that take read (Processor.Reads): a duplicate is found done there. A run that failed
// after its commit is retried in the same turn, and the retry reads them afresh: it finds
// the event done and republishes its result; the stock moves once.
func TestStepDecidesFromWhatTheTakeRead(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := newHarnessWith(t, []ledger.SKU{{SKU: "W", Lots: []ledger.Lot{onHand("W1", 1, 100, "2027-01-01")}}},
		harnessOptions{processor: func(c *order.Config) { c.Registerer = reg }})
	var once sync.Once
	order.SetCrash(h.proc, func(at string) error {
		var err error
		if at == "committed" {
			once.Do(func() { err = errCrash })
		}
		return err
	})
	reads := func(from string) float64 { return metric(t, reg, "junban_order_turn_reads_total", "read", from) }
	replayed := func(kind string) float64 { return metric(t, reg, "junban_order_replayed_total", "kind", kind) }

	e := placed("READ-1", ledger.ModeShip, line("1", "W", 3))
	h.submit(e)
	h.settle("READ-1")
	if got := [3]float64{reads("take"), reads("own"), replayed("rerun")}; got != [3]float64{1, 1, 1} {
		t.Fatalf("placement, failed after its commit, then retried: reads from the take, own reads, re-runs = %v; want 1, 1, 1 (the retry reads afresh and finds it done)", got)
	}
	s, err := h.led.Snapshot(context.Background(), "W")
	if err != nil {
		t.Fatal(err)
	}
	if got := totals(s); got != (bucketTotals{sellable: 97, allocated: 3}) {
		t.Fatalf("W after a placement and its retry: %+v, want 3 allocated once", got)
	}

	pay := ev("READ-1", event.PaymentConfirmed, nil)
	h.submit(pay)
	h.settle("READ-1")
	h.submit(pay) // a duplicate: the take reads its done marker
	h.settle("READ-1")
	if got := [3]float64{reads("take"), reads("own"), replayed("duplicate")}; got != [3]float64{3, 1, 1} {
		t.Fatalf("payment and its duplicate: reads from the take, own reads, duplicates = %v; want 3, 1, 1", got)
	}
	if n := h.pub.count(pay.EventID); n != 1 {
		t.Fatalf("payment delivered twice: result published %d times, want 1", n)
	}
	h.collect(2)
}
