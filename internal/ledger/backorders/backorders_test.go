package backorders

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

var ctx = context.Background()

// loader gives the ledger its SKUs.
type loader map[string]stock.SKU

func (l loader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	s, ok := l[sku]
	if !ok {
		return stock.SKU{}, stock.ErrUnknownSKU
	}
	return s, nil
}

func oneLot(sku string, n int64) stock.SKU {
	return stock.SKU{SKU: sku, Lots: []stock.Lot{{LotID: "L", Kind: stock.KindOnHand, Good: true, RegSeq: 1,
		ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: n}}}
}

// The gauges count the lines waiting over every SKU under the ledger's prefix, and the
// wait of the earliest queued one, at the scan's clock; a SKU without a queue and a
// filled line count for nothing.
func TestGaugesReadTheQueues(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix,
		Loader: loader{"A": oneLot("A", 1), "B": oneLot("B", 0), "C": oneLot("C", 5)}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	backorder := func(sku, holder string, qty int64, at time.Time) {
		t.Helper()
		res, err := l.Apply(ctx, stock.BackorderRequest{OpID: "bo-" + sku + holder, SKU: sku, Holder: holder, Line: "1",
			Qty: qty, TargetDate: "2026-12-01", Mode: stock.ModeShip, QueuedAt: at.UnixMilli()})
		if err != nil {
			t.Fatal(err)
		}
		if want := qty > 0 && sku != "C"; want != (res.Queued > 0) {
			t.Fatalf("backorder %s/%s: %+v", sku, holder, res)
		}
	}
	backorder("A", "LC-1", 3, t0.Add(time.Minute)) // 1 now, 2 wait
	backorder("A", "LC-2", 1, t0.Add(2*time.Minute))
	backorder("B", "LC-3", 4, t0)
	backorder("C", "LC-4", 2, t0.Add(-time.Hour)) // all of it now: no line waits
	reg := prometheus.NewRegistry()
	g, err := New(Config{Queues: l, Registerer: reg, Now: func() time.Time { return t0.Add(10 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Scan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lines != 3 || !st.Oldest.Equal(t0) {
		t.Fatalf("scan %+v", st)
	}
	if n, w := gauge(t, reg, "junban_backorder_lines"), gauge(t, reg, "junban_backorder_oldest_wait_seconds"); n != 3 || w != 600 {
		t.Fatalf("junban_backorder_lines %v, junban_backorder_oldest_wait_seconds %v", n, w)
	}
	// The line of B leaves the queue: the oldest is now A's first.
	if _, err := l.Apply(ctx, stock.DequeueRequest{OpID: "dq", SKU: "B", Holder: "LC-3", Line: "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if n, w := gauge(t, reg, "junban_backorder_lines"), gauge(t, reg, "junban_backorder_oldest_wait_seconds"); n != 2 || w != 540 {
		t.Fatalf("after the dequeue: lines %v, oldest wait %v", n, w)
	}
}

// gauge is the value of the gauge name that reg gathers.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not registered", name)
	return 0
}
