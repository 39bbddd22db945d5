package order_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
)

// Once the shop registers locations, an order without routing fields is routed: it never
// takes a lot at a store that does not ship, though that lot comes first in FEFO order.
// A lot registered at a location the shop registered after the worker's cache last read
// the locations is accepted (the step reads them anew before refusing), one at a location
// the shop lacks is refused, and before the shop registers any, an order takes every lot
// alike.
func TestOrdersWithoutRoutingFieldsTakeOnlyAtShippingLocations(t *testing.T) {
	t.Parallel()
	var cache *ledger.LocationCache
	h := newHarnessWith(t, []stock.SKU{
		{SKU: "L", Lots: []stock.Lot{onHand("L1", 1, 5, "2027-03-01")}},
	}, harnessOptions{processor: func(c *order.Config) {
		cache = ledger.NewLocationCache(c.Redis, c.Prefix, time.Hour)
		c.Policy = domain.Policy{Locations: cache}
	}})
	do := func(e event.Order) event.Result {
		t.Helper()
		h.submit(e)
		h.collect(len(h.results) + 1)
		return h.result(e.EventID)
	}
	lotAt := func(id, location, bestBefore string) event.Order {
		return ev("", event.InventoryLotRegistered, event.LotRegisteredData{SKU: "L", LotID: id, Kind: stock.KindOnHand,
			BestBefore: bestBefore, Sellable: 5, Location: location})
	}
	// No location registered: the worker's cache reads the empty hash and keeps it for an
	// hour; an order takes the first lot in FEFO order, wherever.
	if r := do(placed("O1", stock.ModeShip, line("1", "L", 1))); r.Outcome != event.Applied || movesOf(r) != "[L1:sellable>allocated:1]" {
		t.Fatalf("order before locations: %s/%s %s", r.Outcome, r.Reason, movesOf(r))
	}
	err := ledger.PublishLocations(context.Background(), h.rc, h.prefix, []stock.Location{
		stock.DefaultLocationSettings(),
		{ID: "store", Kind: stock.LocationStore, Pickup: true, Enabled: true},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := do(lotAt("S1", "store", "2026-12-20")); r.Outcome != event.Applied {
		t.Fatalf("a lot at the store the shop just registered: %s/%s (%s)", r.Outcome, r.Reason, r.Detail)
	}
	if r := do(lotAt("N1", "north", "2026-12-20")); r.Outcome != event.Rejected || r.Reason != domain.ReasonUnknownLocation {
		t.Fatalf("a lot at a location the shop lacks: %s/%s (%s)", r.Outcome, r.Reason, r.Detail)
	}
	for i := range 3 {
		r := do(placed(fmt.Sprintf("O%d", i+2), stock.ModeShip, line("1", "L", 1)))
		if r.Outcome != event.Applied || movesOf(r) != "[L1:sellable>allocated:1]" {
			t.Fatalf("order %d without routing fields: %s/%s %s", i+2, r.Outcome, r.Reason, movesOf(r))
		}
	}
	// The store's lot is left to the store: the orders took the default location's last
	// units, and the next is short.
	if r := do(placed("O5", stock.ModeShip, line("1", "L", 2))); r.Outcome != event.Rejected || r.Reason != "ERR_SHORTAGE" {
		t.Fatalf("order beyond the shipping stock: %s/%s %s", r.Outcome, r.Reason, movesOf(r))
	}
}

func movesOf(r event.Result) string {
	var out []string
	for _, m := range r.Moves {
		out = append(out, fmt.Sprintf("%s:%s>%s:%d", m.LotID, m.From, m.To, m.Qty))
	}
	return fmt.Sprint(out)
}

// A fewest_splits order through the processor and the real ledger: planned from the
// availability script's read of each SKU, it takes both lines at the one location that
// covers the whole order, where ranked alone would split the first line over two.
func TestFewestSplitsOrderTakesAtOneLocation(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, []stock.SKU{{SKU: "S"}, {SKU: "T"}}, harnessOptions{processor: func(c *order.Config) {
		c.Policy = domain.Policy{Locations: ledger.NewLocationCache(c.Redis, c.Prefix, time.Hour)}
	}})
	err := ledger.PublishLocations(context.Background(), h.rc, h.prefix, []stock.Location{
		stock.DefaultLocationSettings(),
		{ID: "west", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	do := func(e event.Order) event.Result {
		t.Helper()
		h.submit(e)
		h.collect(len(h.results) + 1)
		return h.result(e.EventID)
	}
	for _, l := range []event.LotRegisteredData{
		{SKU: "S", LotID: "S1", Sellable: 2}, {SKU: "S", LotID: "S2", Sellable: 3, Location: "west"},
		{SKU: "T", LotID: "T2", Sellable: 1, Location: "west"},
	} {
		l.Kind, l.BestBefore = stock.KindOnHand, "2027-01-01"
		if r := do(ev("", event.InventoryLotRegistered, l)); r.Outcome != event.Applied {
			t.Fatalf("lot %s: %s/%s (%s)", l.LotID, r.Outcome, r.Reason, r.Detail)
		}
	}
	order := ev("O1", event.OrderPlaced, event.OrderData{Mode: stock.ModeShip, TargetDate: "2026-12-01",
		Lines: []event.Line{line("1", "S", 3), line("2", "T", 1)}, Allocation: []string{"fewest_splits", "ranked"}})
	if r := do(order); r.Outcome != event.Applied || movesOf(r) != "[S2:sellable>allocated:3 T2:sellable>allocated:1]" {
		t.Fatalf("fewest_splits order: %s/%s (%s) %s", r.Outcome, r.Reason, r.Detail, movesOf(r))
	}
}
