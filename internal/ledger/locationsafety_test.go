package ledger

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// The store keeps 2 of its 3 units: a ship allocation without a route takes 1 there
// (its cap) and the rest from the warehouse, though FEFO puts the store's lot first; a
// reservation reads no safety stock.
func TestLocationSafetyStockCapsShip(t *testing.T) {
	s := stock.SKU{SKU: "A", LocationSafety: map[string]int64{"store": 2},
		Lots: []stock.Lot{locLot("s1", "store", 0, "2026-12-05", 3), locLot("w1", "wh", 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("ship", "A", 4, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"s1", "sellable", "allocated", 1}, mv{"w1", "sellable", "allocated", 3})
		r, err = inv.Apply(ctx, alloc("reserve", "A", 4, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"s1", "sellable", "reserved", 2}, mv{"w1", "sellable", "reserved", 2})
	})
}

// Pinned to the store: what its cap forbids is ERR_SAFETY_STOCK, what it does not have
// at all ERR_SHORTAGE; no_split goes to the first location whose cap covers the line.
func TestLocationSafetyStockRefusals(t *testing.T) {
	locs := []stock.Location{
		{ID: "store", Kind: stock.LocationStore, Rank: 0, Ships: true, Enabled: true},
		{ID: "wh", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
	}
	s := stock.SKU{SKU: "A", LocationSafety: map[string]int64{"store": 2},
		Lots: []stock.Lot{locLot("s1", "store", 0, "2026-12-05", 3), locLot("w1", "wh", 1, "2027-01-01", 5)}}
	b := stock.SKU{SKU: "B", LocationSafety: map[string]int64{"store": 2},
		Lots: []stock.Lot{locLot("s1", "store", 0, "2026-12-05", 3), locLot("w1", "wh", 1, "2027-01-01", 2)}}
	each(t, []stock.SKU{s, b}, func(t *testing.T, inv Inventory) {
		pin := func(op string, qty int64) stock.AllocateRequest {
			a := alloc(op, "A", qty, "2026-12-01", stock.ModeShip)
			a.Route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyPinned}, Pinned: "store", Locations: locs}
			return a
		}
		_, err := inv.Apply(ctx, pin("p2", 2))
		wantErr(t, err, stock.ErrSafetyStock)
		_, err = inv.Apply(ctx, pin("p4", 4))
		wantErr(t, err, stock.ErrShortage)
		r, err := inv.Apply(ctx, pin("p1", 1))
		wantMoves(t, r, err, mv{"s1", "sellable", "allocated", 1})
		one := alloc("one", "A", 2, "2026-12-01", stock.ModeShip)
		one.Route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, NoSplit: true, Locations: locs}
		r, err = inv.Apply(ctx, one)
		wantMoves(t, r, err, mv{"w1", "sellable", "allocated", 2})
		big := one
		big.OpID, big.Qty = "big", 6
		_, err = inv.Apply(ctx, big)
		wantErr(t, err, stock.ErrShortage)
		// B's store alone has the line's 3 units, but keeps 2 of them.
		b := alloc("b", "B", 3, "2026-12-01", stock.ModeShip)
		b.Route = one.Route
		_, err = inv.Apply(ctx, b)
		wantErr(t, err, stock.ErrSafetyStock)
		b.OpID, b.Mode = "b-reserve", stock.ModeReserve
		r, err = inv.Apply(ctx, b)
		wantMoves(t, r, err, mv{"s1", "sellable", "reserved", 3})
	})
}

// The top location's first lot alone covers the line, but not under its cap: the walk
// reads on to the top location's later lot (after the other location's), whose units
// raise the cap, and the line takes the first lot's units as a full read would.
func TestRoutedAllocationReadsOnUntilTheTopLocationCoversUnderItsCap(t *testing.T) {
	locs := []stock.Location{
		{ID: "a", Kind: stock.LocationWarehouse, Rank: 0, Ships: true, Enabled: true},
		{ID: "b", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
	}
	s := stock.SKU{SKU: "A", LocationSafety: map[string]int64{"a": 3},
		Lots: []stock.Lot{locLot("a1", "a", 0, "2026-12-05", 5), locLot("a2", "a", 1, "2027-12-01", 5)}}
	for i := range 8 {
		s.Lots = append(s.Lots, locLot(fmt.Sprintf("b%d", i), "b", int64(2+i), fmt.Sprintf("2027-0%d-01", 1+i), 3))
	}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("top", "A", 3, "2026-12-01", stock.ModeShip)
		a.Route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}
		r, err := inv.Apply(ctx, a)
		wantMoves(t, r, err, mv{"a1", "sellable", "allocated", 3})
	})
}

// A location's safety stock set by its event: the result names the location, the
// network-wide one stays, 0 removes it.
func TestSetLocationSafetyStock(t *testing.T) {
	s := stock.SKU{SKU: "A", SafetyStock: 1,
		Lots: []stock.Lot{locLot("s1", "store", 0, "2026-12-05", 3), locLot("w1", "wh", 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.SafetyStockRequest{OpID: "ss", SKU: "A", SafetyStock: 3, Location: "store"})
		if err != nil || r.SafetyStock != 3 || r.SafetyLocation != "store" {
			t.Fatalf("set: %+v %v", r, err)
		}
		got, err := inv.Snapshot(ctx, "A")
		if err != nil || got.SafetyStock != 1 || got.LocationSafety["store"] != 3 || len(got.LocationSafety) != 1 {
			t.Fatalf("snapshot %+v %v", got, err)
		}
		_, err = inv.Apply(ctx, alloc("over", "A", 6, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrSafetyStock)
		r, err = inv.Apply(ctx, alloc("ship", "A", 5, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"w1", "sellable", "allocated", 5})
		if _, err := inv.Apply(ctx, stock.SafetyStockRequest{OpID: "off", SKU: "A", SafetyStock: 0, Location: "store"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := inv.Snapshot(ctx, "A"); got.LocationSafety != nil {
			t.Fatalf("removed, yet %+v", got.LocationSafety)
		}
	})
}

// Availability reads the locations' caps as an allocation takes them: the take, the
// network figure (the caps' sum) and each location's figure, which an allocation pinned
// there confirms; the fewest_splits read leaves the store's kept units out.
func TestAvailabilityUnderLocationSafetyStock(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", SafetyStock: 1, LocationSafety: map[string]int64{"store": 2},
		Lots: []stock.Lot{locLot("s1", "store", 0, "2026-12-05", 3), locLot("w1", "wh", 1, "2027-01-01", 5)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip, Qty: 4})
	if err != nil {
		t.Fatal(err)
	}
	wantLocs := []LocationAvailability{{"store", 3, 1, false, 2}, {"wh", 5, 4, true, 0}}
	wantTake := []stock.LotQty{{LotID: "s1", Qty: 1}, {LotID: "w1", Qty: 3}}
	if a.Available != 6 || !a.OK || !slices.Equal(a.Locations, wantLocs) || !slices.Equal(a.Take, wantTake) {
		t.Fatalf("availability %+v, want available 6, %+v, take %+v", a, wantLocs, wantTake)
	}
	a, err = l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip, Qty: 7})
	if err != nil || a.Reason != "ERR_SAFETY_STOCK" {
		t.Fatalf("qty 7: %+v %v, want ERR_SAFETY_STOCK", a, err)
	}
	by, err := l.SellableByLocation(ctx, "A", "2026-12-01")
	if err != nil || !maps.Equal(by, map[string]int64{"store": 1, "wh": 5}) {
		t.Fatalf("sellable by location %v %v", by, err)
	}
	locs := []stock.Location{
		{ID: "store", Kind: stock.LocationStore, Ships: true, Enabled: true},
		{ID: "wh", Kind: stock.LocationWarehouse, Ships: true, Enabled: true},
	}
	for _, la := range wantLocs {
		req := alloc("over-"+la.Location, "A", la.Available+1, "2026-12-01", stock.ModeShip)
		req.Route = &stock.Route{Pinned: la.Location, Locations: locs}
		if _, err := l.Apply(ctx, req); err == nil {
			t.Fatalf("%s: %d allocated beyond its figure", la.Location, req.Qty)
		}
	}
}
