package ledger

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// A lot registered at a location keeps it: in the result, in the snapshot and in every
// later result that touches it; a lot registered without one, or with the default's id,
// is at the default location and says none. An operation that names a location checks
// the lot is stored there (ErrLocation, nothing moved) and one that names none does not.
func TestLotsKeepTheirLocation(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("old", stock.KindOnHand, 0, "2027-01-01", 5),
		func() stock.Lot {
			l := lot("s1", stock.KindOnHand, 1, "2027-02-01", 5)
			l.Location = "store-1"
			return l
		}(),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r1", SKU: "A", Lot: stock.NewLot{LotID: "w2", Kind: stock.KindPlanned, Good: true, Sellable: 3, Location: "wh-2"}})
		wantMoves(t, r, err, mv{"w2", stock.External, stock.Sellable, 3})
		if r.Lots[0].Location != "wh-2" {
			t.Fatalf("registered lot %+v", r.Lots[0])
		}
		r, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1, Location: stock.DefaultLocation}})
		wantMoves(t, r, err, mv{"d", stock.External, stock.Sellable, 1})
		if r.Lots[0].Location != "" {
			t.Fatalf("a lot at the default location says %q", r.Lots[0].Location)
		}
		// Registered with the default's id or without one: the same request.
		r, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1}})
		if err != nil || !r.Replayed {
			t.Fatalf("replay without the default's id: %+v %v", r, err)
		}
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1, Location: "wh-2"}})
		wantErr(t, err, stock.ErrOpConflict)

		_, err = inv.Apply(ctx, stock.HoldRequest{OpID: "h1", SKU: "A", LotID: "s1", Qty: 1, Reason: "count", Location: "wh-2"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.AdjustRequest{OpID: "a1", SKU: "A", LotID: "old", Delta: 1, Reason: "count", Location: "store-1"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "v1", SKU: "A", LotID: "w2", Location: stock.DefaultLocation})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.RecallRequest{OpID: "c1", SKU: "A", LotID: "w2", Reason: "recall", Location: "store-1"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.DamageRequest{OpID: "x1", SKU: "A", LotID: "nope", Qty: 1, Reason: "r", Location: "store-1"})
		wantErr(t, err, stock.ErrUnknownLot)

		r, err = inv.Apply(ctx, stock.HoldRequest{OpID: "h2", SKU: "A", LotID: "s1", Qty: 1, Reason: "count", Location: "store-1"})
		wantMoves(t, r, err, mv{"s1", stock.Sellable, stock.Hidden, 1})
		r, err = inv.Apply(ctx, stock.AdjustRequest{OpID: "a2", SKU: "A", LotID: "old", Delta: 1, Reason: "count", Location: stock.DefaultLocation})
		wantMoves(t, r, err, mv{"old", stock.External, stock.Sellable, 1})
		r, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "v2", SKU: "A", LotID: "w2", Location: "wh-2"})
		wantMoves(t, r, err)
		if r.Lots[0].Location != "wh-2" || r.Lots[0].Kind != stock.KindOnHand {
			t.Fatalf("received lot %+v", r.Lots[0])
		}
		r, err = inv.Apply(ctx, alloc("o1", "A", 12, "2026-12-01", stock.ModeShip))
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]string{}
		for _, l := range r.Lots {
			at[l.LotID] = l.Location
		}
		if at["old"] != "" || at["s1"] != "store-1" || at["w2"] != "wh-2" {
			t.Fatalf("allocated lots at %v", at)
		}
		snap, err := inv.Snapshot(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range snap.Lots {
			if l.Location != at[l.LotID] && l.LotID != "d" || l.LotID == "d" && l.Location != "" {
				t.Fatalf("snapshot lot %s at %q, results said %q", l.LotID, l.Location, at[l.LotID])
			}
		}
	})
}

// A SKU hash written before locations has no p:<lot> fields: its lots are at the default
// location, and an operation naming the default location finds them there.
func TestLotsWithoutLocationAreAtTheDefault(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 0, "2027-01-01", 5)}})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot(ctx, "A"); err == nil {
		t.Fatal("loaded before the first operation")
	}
	r, err := l.Apply(ctx, stock.HoldRequest{OpID: "h1", SKU: "A", LotID: "L", Qty: 1, Reason: "count", Location: stock.DefaultLocation})
	wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Hidden, 1})
	fields, err := rc.HKeys(ctx, Key(prefix, "A")).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.HasPrefix(f, "p:") {
			t.Fatalf("a lot at the default location stored %s", f)
		}
	}
	_, err = l.Apply(ctx, stock.HoldRequest{OpID: "h2", SKU: "A", LotID: "L", Qty: 1, Reason: "count", Location: "wh-2"})
	wantErr(t, err, stock.ErrLocation)
}

// locLot is an on-hand lot at a location.
func locLot(id, location string, reg int64, bb string, sellable int64) stock.Lot {
	l := lot(id, stock.KindOnHand, reg, bb, sellable)
	l.Location = location
	return l
}

func ptr(f float64) *float64 { return &f }

// A routed allocation takes only from eligible locations (enabled and shipping, or the
// pinned one), in the order its strategies give, each breaking the ties of the one before,
// and the lots' own order last; no_split takes everything from the first location that
// covers the quantity.
func TestRoutedAllocation(t *testing.T) {
	locs := []stock.Location{
		{ID: "default", Kind: stock.LocationWarehouse, Rank: 2, Ships: true, Enabled: true, Lat: ptr(52.52), Lon: ptr(13.40)}, // Berlin
		{ID: "west", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true, Lat: ptr(48.86), Lon: ptr(2.35)},     // Paris
		{ID: "store", Kind: stock.LocationStore, Rank: 0, Ships: false, Pickup: true, Enabled: true},
		{ID: "off", Kind: stock.LocationWarehouse, Rank: 0, Ships: true, Enabled: false},
	}
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		locLot("d1", "", 0, "2027-03-01", 4),
		locLot("w1", "west", 1, "2027-05-01", 3),
		locLot("w2", "west", 2, "2027-01-01", 2),
		locLot("s1", "store", 3, "2026-12-20", 9),
		locLot("o1", "off", 4, "2026-12-10", 9),
	}}
	route := func(nosplit bool, pinned string, shipTo *stock.Coordinates, ss ...stock.Strategy) *stock.Route {
		return &stock.Route{Strategies: ss, ShipTo: shipTo, Pinned: pinned, NoSplit: nosplit, Locations: locs}
	}
	warsaw := &stock.Coordinates{Lat: 52.23, Lon: 21.01}
	cases := []struct {
		name  string
		route *stock.Route
		qty   int64
		want  []mv
		err   error
	}{
		{"ranked: west first, FEFO within", route(false, "", nil, stock.StrategyRanked), 6, []mv{{"w2", "sellable", "allocated", 2}, {"w1", "sellable", "allocated", 3}, {"d1", "sellable", "allocated", 1}}, nil},
		{"closest to Warsaw: Berlin first", route(false, "", warsaw, stock.StrategyClosest), 5, []mv{{"d1", "sellable", "allocated", 4}, {"w2", "sellable", "allocated", 1}}, nil},
		{"fefo_network: earliest expiry anywhere eligible", route(false, "", nil, stock.StrategyFEFONetwork, stock.StrategyRanked), 3, []mv{{"w2", "sellable", "allocated", 2}, {"d1", "sellable", "allocated", 1}}, nil},
		{"no strategy: the lots' own order", route(false, "", nil), 3, []mv{{"w2", "sellable", "allocated", 2}, {"d1", "sellable", "allocated", 1}}, nil},
		{"pinned pickup at a store that does not ship", route(false, "store", nil, stock.StrategyPinned), 2, []mv{{"s1", "sellable", "allocated", 2}}, nil},
		{"no split: the first location that covers it", route(true, "", warsaw, stock.StrategyClosest), 5, []mv{{"w2", "sellable", "allocated", 2}, {"w1", "sellable", "allocated", 3}}, nil},
		{"no split: the first location when it covers it", route(true, "", warsaw, stock.StrategyClosest), 4, []mv{{"d1", "sellable", "allocated", 4}}, nil},
		{"no split: none covers it", route(true, "", nil, stock.StrategyRanked), 6, nil, stock.ErrShortage},
		{"only eligible stock counts", route(false, "", nil, stock.StrategyRanked), 10, nil, stock.ErrShortage},
		{"a disabled pinned location has nothing", route(false, "off", nil), 1, nil, stock.ErrShortage},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
				a := alloc("r"+string(rune('a'+i)), "A", c.qty, "2026-12-01", stock.ModeShip)
				a.Route = c.route
				r, err := inv.Apply(ctx, a)
				if c.err != nil {
					wantErr(t, err, c.err)
					return
				}
				wantMoves(t, r, err, c.want...)
			})
		})
	}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("bad", "A", 1, "2026-12-01", stock.ModeShip)
		a.Route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyClosest}}
		_, err := inv.Apply(ctx, a)
		wantErr(t, err, stock.ErrInvalidRequest)
		// The route is part of the request: another route under the op id is refused.
		a = alloc("x", "A", 1, "2026-12-01", stock.ModeShip)
		a.Route = route(false, "", nil, stock.StrategyRanked)
		if _, err := inv.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Route = route(true, "", nil, stock.StrategyRanked)
		_, err = inv.Apply(ctx, a)
		wantErr(t, err, stock.ErrOpConflict)
		// The shop's locations are not: a re-run after a location changed replays.
		a.Route = route(false, "", nil, stock.StrategyRanked)
		a.Route.Locations = nil
		if r, err := inv.Apply(ctx, a); err != nil || !r.Replayed {
			t.Fatalf("replay with other locations: %+v %v", r, err)
		}
	})
}

// The cache answers from its last read within its TTL and reads again after it; with no
// TTL it reads every time.
func TestLocationCache(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	west := stock.Location{ID: "west", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true}
	if err := PublishLocations(ctx, rc, prefix, []stock.Location{west}, false); err != nil {
		t.Fatal(err)
	}
	kept, fresh := NewLocationCache(rc, prefix, time.Hour), NewLocationCache(rc, prefix, 0)
	for _, c := range []*LocationCache{kept, fresh} {
		if got, err := c.Locations(ctx); err != nil || len(got) != 2 || got[0].ID != "default" || !reflect.DeepEqual(got[1], west) {
			t.Fatalf("first read %+v %v", got, err)
		}
	}
	west.Enabled = false
	if err := PublishLocations(ctx, rc, prefix, []stock.Location{west}, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := kept.Locations(ctx); !got[1].Enabled {
		t.Fatal("the cache read again within its TTL")
	}
	if got, _ := fresh.Locations(ctx); got[1].Enabled {
		t.Fatal("a cache without TTL kept its last read")
	}
	if s, err := kept.Shop(ctx, true); err != nil || !s.Registered || s.All[1].Enabled {
		t.Fatalf("a fresh read within the TTL: %+v %v", s, err)
	}
	if s, _ := kept.Shop(ctx, false); s.All[1].Enabled {
		t.Fatal("the cache did not keep its fresh read")
	}
}

// A shop that has registered no location has the default one alone, and says so.
func TestShopWithoutLocations(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s, err := NewLocationCache(rc, prefix, time.Hour).Shop(ctx, false)
	if err != nil || s.Registered || !reflect.DeepEqual(s, stock.DefaultShopLocations()) {
		t.Fatalf("no locations: %+v %v", s, err)
	}
	if !s.Has("default") || !s.Has("") || s.Has("west") {
		t.Fatalf("Has: %+v", s)
	}
	if err := PublishLocations(ctx, rc, prefix, []stock.Location{stock.DefaultLocationSettings()}, false); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadShopLocations(ctx, rc, prefix); err != nil || !s.Registered || len(s.All) != 1 {
		t.Fatalf("the default location registered: %+v %v", s, err)
	}
}

// A routed change allocates each quantity as a routed allocation would, over the state
// its releases left: what it gives back at one location is taken again only where the
// route allows.
func TestRoutedChange(t *testing.T) {
	locs := []stock.Location{
		{ID: "default", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		{ID: "store", Kind: stock.LocationStore, Ships: false, Pickup: true, Enabled: true},
	}
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		func() stock.Lot { l := lot("d1", stock.KindOnHand, 0, "2027-03-01", 0); l.Allocated = 2; return l }(),
		locLot("s1", "store", 1, "2026-12-20", 3),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		// Give back 2 at the default location, allocate 4 at the store: only 3 there.
		c := stock.ChangeRequest{OpID: "c1", SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip,
			Release: []stock.LotQty{{LotID: "d1", Qty: 2}}, Allocate: []int64{4},
			Route: &stock.Route{Pinned: "store", Locations: locs}}
		_, err := inv.Apply(ctx, c)
		wantErr(t, err, stock.ErrShortage)
		c.OpID, c.Allocate = "c2", []int64{3}
		r, err := inv.Apply(ctx, c)
		wantMoves(t, r, err, mv{"d1", stock.Allocated, stock.Sellable, 2}, mv{"s1", stock.Sellable, stock.Allocated, 3})
		// Routed to shipping locations only, the unit given back at the store is not
		// taken again: the default location serves.
		c = stock.ChangeRequest{OpID: "c3", SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip,
			Release: []stock.LotQty{{LotID: "s1", Qty: 1}}, Allocate: []int64{2},
			Route: &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}}
		r, err = inv.Apply(ctx, c)
		wantMoves(t, r, err, mv{"s1", stock.Allocated, stock.Sellable, 1}, mv{"d1", stock.Sellable, stock.Allocated, 2})
	})
}

// A fewest_splits allocation takes at its plan's locations first, in the plan's order,
// and refuses with ErrStalePlan, moving nothing, when they no longer cover its quantity
// (the refusal is remembered; the plan is not in the fingerprint, so a request with
// another plan under the op id replays it). The plan goes into the SKU's one script.
func TestPlannedAllocation(t *testing.T) {
	locs := []stock.Location{
		{ID: "default", Kind: stock.LocationWarehouse, Rank: 0, Ships: true, Enabled: true},
		{ID: "wh-2", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		{ID: "wh-3", Kind: stock.LocationWarehouse, Rank: 2, Ships: true, Enabled: true},
	}
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("d1", stock.KindOnHand, 0, "2027-01-01", 2),
		locLot("w2", "wh-2", 1, "2027-02-01", 3),
		locLot("w3", "wh-3", 2, "2026-12-20", 4),
	}}
	route := func(plan ...string) *stock.Route {
		return &stock.Route{Strategies: []stock.Strategy{stock.StrategyFewestSplits, stock.StrategyRanked}, Locations: locs, Plan: plan}
	}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		alloc := func(id string, qty int64, r *stock.Route) (stock.Result, error) {
			return inv.Apply(ctx, stock.AllocateRequest{OpID: id, SKU: "A", Qty: qty, TargetDate: "2026-12-01", Mode: stock.ModeShip, Route: r})
		}
		// What a plan reads: the candidates' sellable per location.
		got, err := inv.(interface {
			SellableByLocation(ctx context.Context, sku, date string) (map[string]int64, error)
		}).SellableByLocation(ctx, "A", "2026-12-01")
		if want := map[string]int64{"default": 2, "wh-2": 3, "wh-3": 4}; err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("sellable by location %v %v", got, err)
		}
		r, err := alloc("p1", 3, route("wh-2"))
		wantMoves(t, r, err, mv{"w2", stock.Sellable, stock.Allocated, 3})
		r, err = alloc("p2", 5, route("wh-3", "default"))
		wantMoves(t, r, err, mv{"w3", stock.Sellable, stock.Allocated, 4}, mv{"d1", stock.Sellable, stock.Allocated, 1})
		// wh-2 is empty now: a plan made before is stale, though default could serve.
		_, err = alloc("p3", 1, route("wh-2"))
		wantErr(t, err, stock.ErrStalePlan)
		_, err = alloc("p3", 1, route("default"))
		wantErr(t, err, stock.ErrStalePlan)
		// Without a plan the strategy tells no location apart.
		r, err = alloc("p4", 1, route())
		wantMoves(t, r, err, mv{"d1", stock.Sellable, stock.Allocated, 1})
		// The network's shortage comes before the plan's.
		_, err = alloc("p5", 1, route("wh-2"))
		wantErr(t, err, stock.ErrShortage)
		_, err = alloc("p6", 1, &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs, Plan: []string{"wh-2"}})
		wantErr(t, err, stock.ErrInvalidRequest)
	})
}

// The plan: one location that covers the whole order, the first in order; else the
// greedy cover by the fewest locations.
func TestPlanFewestSplits(t *testing.T) {
	order := []string{"a", "b", "c"}
	for _, c := range []struct {
		name     string
		demand   map[string]int64
		sellable map[string]map[string]int64
		want     map[string][]string
		ok       bool
	}{
		{name: "the first location that covers the whole order",
			demand:   map[string]int64{"X": 2, "Y": 1},
			sellable: map[string]map[string]int64{"X": {"a": 5, "b": 2, "c": 2}, "Y": {"b": 1, "c": 1}},
			want:     map[string][]string{"X": {"b"}, "Y": {"b"}}, ok: true},
		{name: "no whole cover: the location covering most units first, then the rest",
			demand:   map[string]int64{"X": 3, "Y": 2},
			sellable: map[string]map[string]int64{"X": {"a": 3, "b": 1}, "Y": {"b": 2, "c": 2}},
			want:     map[string][]string{"X": {"a"}, "Y": {"b"}}, ok: true},
		{name: "a tie goes to the first in order",
			demand:   map[string]int64{"X": 4},
			sellable: map[string]map[string]int64{"X": {"a": 2, "b": 2, "c": 2}},
			want:     map[string][]string{"X": {"a", "b"}}, ok: true},
		{name: "not coverable",
			demand:   map[string]int64{"X": 4, "Y": 1},
			sellable: map[string]map[string]int64{"X": {"a": 2, "b": 1}, "Y": {"c": 1}},
			ok:       false},
	} {
		got, ok := stock.PlanFewestSplits(c.demand, c.sellable, order)
		if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// A routed allocation may stop reading candidates once the top position's alone cover
// the quantity; until they do, it reads on, past every other location's lots. Here the
// top location (ranked first) has the earliest lot of 1 unit and the latest of 5, with
// eight of another location's lots between them in the allocation order: 3 units take
// the top location's two lots, and none of the others. Seen failing against a walk that
// stopped once the eligible candidates read covered the need (it took 1 from a1 and 2
// from the other location's b0).
func TestRoutedAllocationReadsOnUntilTheTopLocationCovers(t *testing.T) {
	locs := []stock.Location{
		{ID: "a", Kind: stock.LocationWarehouse, Rank: 0, Ships: true, Enabled: true},
		{ID: "b", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
	}
	s := stock.SKU{SKU: "A", SafetyStock: 2, Lots: []stock.Lot{locLot("a1", "a", 0, "2026-12-05", 1), locLot("a2", "a", 1, "2027-12-01", 5)}}
	for i := range 8 {
		s.Lots = append(s.Lots, locLot(fmt.Sprintf("b%d", i), "b", int64(2+i), fmt.Sprintf("2027-0%d-01", 1+i), 3))
	}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("top", "A", 3, "2026-12-01", stock.ModeShip)
		a.Route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}
		r, err := inv.Apply(ctx, a)
		wantMoves(t, r, err, mv{"a1", "sellable", "allocated", 1}, mv{"a2", "sellable", "allocated", 2})
	})
}
