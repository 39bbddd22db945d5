package api

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// A repeated availability read is answered from the script's answer at the SKU's current
// version, and an allocation in between (a new version) is seen at once. Broken variant
// tried: a cache keyed without the version answered the stale sellable after the
// allocation.
func TestAvailabilityCacheFollowsTheVersion(t *testing.T) {
	e := newEnv(t)
	e.seedSKU(stock.SKU{SKU: "C", Lots: []stock.Lot{onhand("L1", 1, "2027-01-01", 10)}})
	read := func() ledger.Availability {
		t.Helper()
		code, body := e.do("GET", "/v1/skus/C/availability?date=2026-12-01&qty=2", readToken, nil)
		var a ledger.Availability
		decode(t, body, &a)
		if code != 200 {
			t.Fatalf("availability: %d %s", code, body)
		}
		return a
	}
	first := read()
	again := read()
	if hits := counterValue(t, e.api.m.availHits); hits != 1 || again.Version != first.Version || again.Sellable != 10 {
		t.Fatalf("second read: %d cache hits, %+v", int(hits), again)
	}
	if _, err := e.api.d.Ledger.Apply(context.Background(), stock.AllocateRequest{
		OpID: "c-1", SKU: "C", Qty: 3, TargetDate: "2026-12-01", Mode: stock.ModeShip}); err != nil {
		t.Fatal(err)
	}
	after := read()
	if after.Sellable != 7 || after.Version <= first.Version {
		t.Fatalf("after an allocation: %+v (the cached answer of version %d must not be served)", after, first.Version)
	}
	if hits := counterValue(t, e.api.m.availHits); hits != 1 {
		t.Fatalf("%d cache hits after the allocation, want still 1", int(hits))
	}
}

// An answer is served for its version no longer than availCacheTTL.
func TestAvailabilityCacheEntriesExpire(t *testing.T) {
	c := newAvailCache()
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	k := availKey{sku: "C", date: "2026-12-01", mode: stock.ModeShip}
	c.put(k, 5, []byte("x"))
	if _, ok := c.get(k, 5); !ok {
		t.Fatal("fresh entry missed")
	}
	if _, ok := c.get(k, 6); ok {
		t.Fatal("entry served for another version")
	}
	now = now.Add(availCacheTTL)
	if _, ok := c.get(k, 5); ok {
		t.Fatal("entry served past its TTL")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// The answer says the SKU's waiting demand and holds it back from available and from
// the qty answer; a cached answer keeps it, and a dequeue (a new version) is seen at once.
func TestAvailabilityShowsTheWaitingDemand(t *testing.T) {
	e := newEnv(t)
	l1 := onhand("L1", 1, "2027-01-01", 10)
	l1.ValidFrom = "2026-12-01"
	e.seedSKU(stock.SKU{SKU: "W", SafetyStock: 1, Lots: []stock.Lot{l1}})
	led := e.api.d.Ledger
	// No lot serves the 30th of November: the line waits for all 3.
	if r, err := led.Apply(context.Background(), stock.BackorderRequest{OpID: "w-1", SKU: "W", Holder: "o1", Line: "1",
		Qty: 3, TargetDate: "2026-11-30", Mode: stock.ModeReserve}); err != nil || r.Queued != 3 {
		t.Fatalf("backorder: %+v %v", r, err)
	}
	read := func() ledger.Availability {
		t.Helper()
		code, body := e.do("GET", "/v1/skus/W/availability?date=2026-12-01&qty=7", readToken, nil)
		var a ledger.Availability
		decode(t, body, &a)
		if code != 200 {
			t.Fatalf("availability: %d %s", code, body)
		}
		return a
	}
	for range 2 { // the script's answer, then the cached one
		a := read()
		if a.Waiting != 3 || a.Available != 6 || a.OK || a.Detail != "requested=7 available=7 safety_stock=1 queued=3" {
			t.Fatalf("with 3 waiting: %+v", a)
		}
	}
	if hits := counterValue(t, e.api.m.availHits); hits != 1 {
		t.Fatalf("%d cache hits, want 1", int(hits))
	}
	if _, err := led.Apply(context.Background(), stock.DequeueRequest{OpID: "w-2", SKU: "W", Holder: "o1", Line: "1", Qty: 2}); err != nil {
		t.Fatal(err)
	}
	if a := read(); a.Waiting != 1 || a.Available != 8 || !a.OK {
		t.Fatalf("with 1 waiting: %+v", a)
	}
}
