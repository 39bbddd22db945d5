package persist_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
)

// A location's safety stock reaches sku_location_safety from its result, leaves the
// SKU's network-wide one as it was, and comes back with the SKU's load after Redis lost
// it: the store still keeps its units from a ship allocation. An older result applied
// after a newer one does not undo it.
func TestLocationSafetyStockIsPersistedAndLoaded(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	sku := func(id, data string, typ event.Type) domain.Event {
		ev, err := domain.Decode([]byte(`{"event_id":"`+id+`","type":"`+string(typ)+`","occurred_at":"2026-12-01T08:00:00Z","data":`+data+`}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	evs := []domain.Event{
		sku("s", `{"sku":"SS","safety_stock":1}`, event.InventorySKURegistered),
		sku("l1", `{"sku":"SS","lot_id":"S","kind":"onhand","best_before":"2027-01-01","sellable":3,"location":"store-1"}`, event.InventoryLotRegistered),
		sku("l2", `{"sku":"SS","lot_id":"D","kind":"onhand","best_before":"2027-02-01","sellable":5}`, event.InventoryLotRegistered),
		sku("ss1", `{"sku":"SS","safety_stock":1,"location":"store-1"}`, event.InventorySafetyStockChanged),
		sku("ss2", `{"sku":"SS","safety_stock":2,"location":"store-1"}`, event.InventorySafetyStockChanged),
	}
	pol := domain.Policy{Locations: fixedLocations{{ID: stock.DefaultLocation, Kind: stock.LocationWarehouse, Ships: true, Enabled: true},
		{ID: "store-1", Kind: stock.LocationStore, Ships: true, Enabled: true}}}
	_, results, err := domain.Replay(ctx, led, pol, evs, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Outcome != event.Applied {
			t.Fatalf("%s: %+v", r.EventID, r)
		}
	}
	db := testenv.Postgres(t)
	// The newer setting first: the older one, applied after it, changes nothing.
	apply(t, db, results[:3])
	apply(t, db, results[4:])
	apply(t, db, results[3:4])
	want, err := led.Snapshot(ctx, "SS")
	if err != nil {
		t.Fatal(err)
	}
	if want.SafetyStock != 1 || !reflect.DeepEqual(want.LocationSafety, map[string]int64{"store-1": 2}) {
		t.Fatalf("Redis holds %+v", want)
	}
	got, err := inventorydb.PGLoader{DB: db}.LoadSKU(ctx, "SS")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nRedis holds\n%+v", got, want)
	}
	// Redis loses the SKU; the next operation loads it from PostgreSQL.
	if err := rc.Del(ctx, ledger.Key(prefix, "SS")).Err(); err != nil {
		t.Fatal(err)
	}
	led2, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	ship := stock.AllocateRequest{OpID: "a", SKU: "SS", Qty: 2, TargetDate: "2026-12-01", Mode: stock.ModeShip}
	res, err := led2.Apply(ctx, ship)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moves) != 2 || res.Moves[0].LotID != "S" || res.Moves[0].Qty != 1 || res.Moves[1].LotID != "D" {
		t.Fatalf("after the load the store's cap is gone: moves %+v", res.Moves)
	}
	ship.OpID, ship.Qty = "b", 6
	if _, err := led2.Apply(ctx, ship); !errors.Is(err, stock.ErrSafetyStock) {
		t.Fatalf("6 more: %v, want ERR_SAFETY_STOCK", err)
	}
}
