package persist_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/orderdb"
	"github.com/junban/junban/internal/testenv"
)

// A lot's location reaches lots.location from its results and comes back with the SKU's
// next load; a lot at the default location is stored as "default" and loads as none. A
// later result that names no location (a worker from before locations) leaves the row's
// location as it is, in either order of the results.
func TestLotLocationsArePersistedAndLoaded(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	must := func(res stock.Result, err error) stock.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	reg := must(led.Apply(ctx, stock.RegisterSKURequest{OpID: "s", SKU: "LOC"}))
	w2 := must(led.Apply(ctx, stock.RegisterLotRequest{OpID: "l1", SKU: "LOC", Lot: stock.NewLot{LotID: "W2", Kind: stock.KindOnHand, Good: true, Sellable: 5, Location: "wh-2"}}))
	def := must(led.Apply(ctx, stock.RegisterLotRequest{OpID: "l2", SKU: "LOC", Lot: stock.NewLot{LotID: "D", Kind: stock.KindOnHand, Good: true, Sellable: 5}}))
	hold := must(led.Apply(ctx, stock.HoldRequest{OpID: "h", SKU: "LOC", LotID: "W2", Qty: 1, Reason: "count", Location: "wh-2"}))
	if hold.Lots[0].Location != "wh-2" {
		t.Fatalf("held lot %+v", hold.Lots[0])
	}
	old := hold
	old.Lots = []stock.Lot{hold.Lots[0]}
	old.Lots[0].Location = "" // as a worker from before locations reports it
	results := []event.Result{
		skuResult("e1", event.InventorySKURegistered, 1, reg),
		skuResult("e2", event.InventoryLotRegistered, 2, w2),
		skuResult("e3", event.InventoryLotRegistered, 3, def),
		skuResult("e4", event.InventoryHeld, 4, old),
	}
	want, err := led.Snapshot(ctx, "LOC")
	if err != nil {
		t.Fatal(err)
	}
	for name, order := range map[string][]int{"in order": {0, 1, 2, 3}, "the old result first": {3, 0, 2, 1}} {
		t.Run(name, func(t *testing.T) {
			db := testenv.Postgres(t)
			for _, i := range order {
				apply(t, db, []event.Result{results[i]})
			}
			var rows []struct{ LotID, Location string }
			if err := db.Raw(`SELECT lot_id, location FROM lots WHERE sku = 'LOC' ORDER BY lot_id`).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 || rows[0].Location != "default" || rows[1].Location != "wh-2" {
				t.Fatalf("lots rows %+v", rows)
			}
			got, err := inventorydb.PGLoader{DB: db}.LoadSKU(ctx, "LOC")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("loaded\n%+v\nRedis holds\n%+v", got, want)
			}
		})
	}
}

// An order's route reaches orders.route and comes back with the order's load from
// PostgreSQL (after a Redis data loss); an order without one stores NULL and loads none.
func TestOrderRouteIsPersistedAndLoaded(t *testing.T) {
	db := testenv.Postgres(t)
	routed := event.OrderSnapshot{LCID: "LC-R", Status: event.StatusPlaced, Allocation: "allocated", Mode: stock.ModeShip,
		TargetDate: "2026-12-01", Lines: []event.SnapshotLine{{LineID: "1", SKU: "A", Qty: 2,
			Lots: []stock.LotQty{{LotID: "L1", Qty: 2, Location: "west"}}}},
		Route: &event.Routing{Allocation: []string{"closest", "ranked"}, ShipTo: &event.Coordinates{Lat: 52.52, Lon: 13.405}, PickupLocation: "west", NoSplit: true}}
	plain := routed
	plain.LCID, plain.Route = "LC-P", nil
	for i, o := range []event.OrderSnapshot{routed, plain} {
		apply(t, db, []event.Result{{EventID: "e" + o.LCID, Entity: o.LCID, LCID: o.LCID, Seq: int64(i + 1),
			Type: event.OrderPlaced, Outcome: event.Applied, Order: &o, ProcessedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}})
	}
	for _, want := range []event.OrderSnapshot{routed, plain} {
		got, _, ok, err := orderdb.PGLoader{DB: db}.LoadOrder(context.Background(), want.LCID)
		if err != nil || !ok {
			t.Fatalf("load %s: %v %v", want.LCID, ok, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("loaded\n%+v\nwant\n%+v", *got, want)
		}
	}
}

// An order.allocation_moved run on Redis reaches PostgreSQL through its result: the lots
// it gave back and took, with their locations, and the order whose line now holds units
// at the destination, each loading back as Redis and the order-worker hold them.
func TestMovedAllocationIsPersisted(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	body := func(id, typ, data string) domain.Event {
		ev, err := domain.Decode([]byte(`{"event_id":"`+id+`","type":"`+typ+`","lcid":"LC-M","occurred_at":"2026-12-01T09:00:00Z","data":`+data+`}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	sku := func(id, typ, data string) domain.Event {
		ev, err := domain.Decode([]byte(`{"event_id":"`+id+`","type":"`+typ+`","occurred_at":"2026-12-01T08:00:00Z","data":`+data+`}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	evs := []domain.Event{
		sku("s", "inventory.sku_registered", `{"sku":"MV","safety_stock":0}`),
		sku("l1", "inventory.lot_registered", `{"sku":"MV","lot_id":"D","kind":"onhand","best_before":"2027-01-01","sellable":5}`),
		sku("l2", "inventory.lot_registered", `{"sku":"MV","lot_id":"S","kind":"onhand","best_before":"2027-02-01","sellable":5,"location":"store-1"}`),
		body("p", "order.placed", `{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"MV","qty":3}]}`),
		body("m", "order.allocation_moved", `{"line_id":"1","to_location":"store-1"}`),
	}
	pol := domain.Policy{Locations: fixedLocations{{ID: stock.DefaultLocation, Kind: stock.LocationWarehouse, Ships: true, Enabled: true},
		{ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true}}}
	states, results, err := domain.Replay(ctx, led, pol, evs, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	last := results[len(results)-1]
	if last.Type != event.OrderAllocationMoved || last.Outcome != event.Applied {
		t.Fatalf("the move: %+v", last)
	}
	db := testenv.Postgres(t)
	apply(t, db, results)
	want, err := led.Snapshot(ctx, "MV")
	if err != nil {
		t.Fatal(err)
	}
	got, err := inventorydb.PGLoader{DB: db}.LoadSKU(ctx, "MV")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nRedis holds\n%+v", got, want)
	}
	order, _, ok, err := orderdb.PGLoader{DB: db}.LoadOrder(ctx, "LC-M")
	if err != nil || !ok {
		t.Fatalf("load LC-M: %v %v", ok, err)
	}
	if lots := order.Lines[0].Lots; !reflect.DeepEqual(lots, []stock.LotQty{{LotID: "S", Qty: 3, Location: "store-1"}}) ||
		!reflect.DeepEqual(*order, *states["LC-M"].Order) {
		t.Fatalf("loaded order\n%+v\nthe worker holds\n%+v", *order, *states["LC-M"].Order)
	}
}

// fixedLocations are a shop's locations.
type fixedLocations []stock.Location

func (f fixedLocations) Shop(context.Context, bool) (stock.ShopLocations, error) {
	return stock.ShopLocations{All: f, Registered: true}, nil
}
