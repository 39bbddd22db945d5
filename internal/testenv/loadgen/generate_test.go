package loadgen

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

func TestGenerateIsReproducibleAndShapedAsAsked(t *testing.T) {
	spec := DefaultSpec("T")
	spec.Orders = 500
	a, b := Generate(spec), Generate(spec)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("the same spec generated two different workloads")
	}
	seen := map[string]int{}
	pos := map[string]int{}
	for i, e := range a.Events {
		body, _ := json.Marshal(e)
		if _, err := domain.Decode(body, 0); err != nil {
			t.Fatalf("generated an invalid event: %v\n%s", err, body)
		}
		if seen[e.EventID] == 0 {
			pos[e.EventID] = i
		}
		seen[e.EventID]++
	}
	if len(seen) != a.Distinct || len(a.Orders) != spec.Orders {
		t.Fatalf("distinct %d, counted %d; orders %d", a.Distinct, len(seen), len(a.Orders))
	}
	dups := float64(len(a.Events)-a.Distinct) / float64(a.Distinct)
	if dups < spec.DuplicateShare/2 || dups > spec.DuplicateShare*2 {
		t.Errorf("duplicate share %.2f, asked %.2f", dups, spec.DuplicateShare)
	}
	if len(a.EarlyPayments) == 0 {
		t.Fatal("no payment arrives before its placement")
	}
	for _, id := range a.EarlyPayments {
		lcid := id[:len(id)-4] // "<lcid>-e03"
		if pos[id] > pos[lcid+"-e01"] {
			t.Errorf("%s is not sent before its placement", id)
		}
	}
	types := map[event.Type]int{}
	for _, e := range a.Events {
		types[e.Type]++
	}
	for _, ty := range []event.Type{event.OrderPlaced, event.PaymentConfirmed, event.OrderShipped, event.OrderCancelled, event.OrderLinesChanged, event.OrderAllocateForShipment} {
		if types[ty] == 0 {
			t.Errorf("no %s in the workload", ty)
		}
	}
}

func TestWarehouseFeed(t *testing.T) {
	spec := DefaultSpec("W")
	spec.Orders = 2000
	w := Generate(spec)
	pos := map[string]int{}
	distinct := map[event.Type]int{}
	feed := 0
	for i, e := range w.Events {
		if _, ok := pos[e.EventID]; ok {
			continue
		}
		pos[e.EventID] = i
		distinct[e.Type]++
		if IsWarehouse(e.Type) {
			feed++
		}
		body, _ := json.Marshal(e)
		if _, err := domain.Decode(body, 0); err != nil {
			t.Fatalf("generated an invalid event: %v\n%s", err, body)
		}
	}
	if share := float64(feed) / float64(w.Distinct); share < spec.WarehouseShare/2 || share > spec.WarehouseShare*2 {
		t.Errorf("warehouse share %.3f, asked %.3f", share, spec.WarehouseShare)
	}
	for _, ty := range []event.Type{event.InventorySKURegistered, event.InventoryLotRegistered, event.InventoryReceived,
		event.InventorySafetyStockChanged, event.InventoryHeld, event.InventoryReleasedHold, event.InventoryDamaged,
		event.InventoryLotRecalled, event.OrderReturned} {
		if distinct[ty] == 0 {
			t.Errorf("no %s in the workload", ty)
		}
	}
	if len(w.NewSKUs) == 0 {
		t.Fatal("no SKU registered during the run")
	}
	// A gate waits for events sent before it, and every order naming a new SKU is sent
	// after the gate that waits for the SKU's lots.
	lotsIn := map[string]int{} // new SKU -> At of the gate after its lots
	for _, g := range w.Gates {
		for _, id := range g.After {
			if pos[id] >= g.At {
				t.Errorf("gate at %d waits for %s, sent at %d", g.At, id, pos[id])
			}
			var d struct{ SKU string }
			json.Unmarshal(w.Events[pos[id]].Data, &d)
			if w.Events[pos[id]].Type == event.InventoryLotRegistered {
				lotsIn[d.SKU] = g.At
			}
		}
	}
	ordered := map[string]bool{}
	for i, e := range w.Events {
		if e.Type != event.OrderPlaced && e.Type != event.OrderLinesChanged {
			continue
		}
		var d event.OrderData
		json.Unmarshal(e.Data, &d)
		for _, l := range d.Lines {
			at, isNew := lotsIn[l.SKU]
			if slices.Contains(w.NewSKUs, l.SKU) {
				ordered[l.SKU] = true
				if !isNew || i < at {
					t.Fatalf("%s names %s at %d, before the gate after its lots (%d)", e.EventID, l.SKU, i, at)
				}
			}
		}
	}
	if len(ordered) == 0 {
		t.Error("no order names a SKU registered during the run")
	}
}

// With FeedCommutes, no recall takes the lot that orders take first: the lowest
// best-before of the SKU's lots (imported, or registered with the SKU).
func TestCommutingFeedSparesTheFirstLot(t *testing.T) {
	spec := DefaultSpec("C")
	spec.Orders, spec.StockPerLot, spec.FeedCommutes = 3000, 1_000_000, true
	spec.WarehouseShare = 0.1
	w := Generate(spec)
	recalls := 0
	for _, e := range w.Events {
		if e.Type != event.InventoryLotRecalled {
			continue
		}
		recalls++
		var d event.LotRecalledData
		json.Unmarshal(e.Data, &d)
		if d.LotID == "L00" {
			t.Errorf("%s recalls %s/%s, the SKU's first lot in FEFO order", e.EventID, d.SKU, d.LotID)
		}
	}
	if recalls == 0 {
		t.Fatal("no recall to look at")
	}
}

// The demo's workload sends every kind of event a shop sends (every registered kind but
// junban's own drain): a kind registered without a generator here fails this test.
func TestWorkloadCoversEveryKind(t *testing.T) {
	spec := DefaultSpec("K")
	spec.Orders = 2000
	// Abandoned checkouts, as the demo has them (DEMO_ABANDONED), extend their holds.
	spec.AbandonedShare, spec.HoldFor, spec.ExtendShare = 0.1, 5*time.Second, 0.5
	// Transfers need two locations.
	spec.Locations = []stock.Location{
		{ID: "wh", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		{ID: "store", Kind: stock.LocationStore, Rank: 2, Pickup: true, Enabled: true},
	}
	seen := map[event.Type]bool{}
	for _, e := range Generate(spec).Events {
		seen[e.Type] = true
	}
	for _, k := range domain.Kinds() {
		// junban's own: the drain nudge, and the expiry the order-worker submits when a
		// hold passes.
		if k.Origin == domain.FromSender && !seen[k.Type] {
			t.Errorf("loadgen generates no %s event", k.Type)
		}
	}
}

// Abandoned checkouts: the asked share of reserve orders, placed with the hold, sent
// with their occurred_at at send time (AtSend), never paid, cancelled nor shipped; some
// extended; distinct events counted once.
func TestAbandonedOrders(t *testing.T) {
	spec := DefaultSpec("A")
	spec.Orders, spec.AbandonedShare, spec.HoldFor, spec.ExtendShare = 1000, 0.2, 5*time.Second, 0.5
	w := Generate(spec)
	byOrder := map[string][]event.Order{}
	ids := map[string]bool{}
	for _, e := range w.Events {
		byOrder[e.LCID] = append(byOrder[e.LCID], e)
		ids[e.EventID] = true
	}
	if len(ids) != w.Distinct {
		t.Errorf("%d distinct event ids, Distinct says %d", len(ids), w.Distinct)
	}
	// About 20% of the ~50% reserve orders.
	if n := len(w.Abandoned); n < 60 || n > 140 {
		t.Fatalf("%d abandoned orders of 1000, want about 100", n)
	}
	ext := map[string]bool{}
	for _, lcid := range w.Abandoned {
		for _, e := range byOrder[lcid] {
			switch e.Type {
			case event.OrderPlaced:
				var d event.OrderData
				if err := json.Unmarshal(e.Data, &d); err != nil || d.Mode != stock.ModeReserve || d.HoldFor != "5s" {
					t.Fatalf("%s: placement %s (%v)", lcid, e.Data, err)
				}
			case event.OrderReservationExtended:
				ext[lcid] = true
				var d event.ReservationExtendedData
				if err := json.Unmarshal(e.Data, &d); err != nil || d.HoldFor != "10s" {
					t.Fatalf("%s: extension %s (%v)", lcid, e.Data, err)
				}
			default:
				t.Fatalf("%s: an abandoned order sends %s", lcid, e.Type)
			}
			if !w.AtSend[e.EventID] {
				t.Fatalf("%s: %s does not occur at its sending", lcid, e.EventID)
			}
		}
	}
	if extended := len(ext); extended == 0 || extended == len(w.Abandoned) {
		t.Errorf("%d of %d abandoned orders extended, want about half", extended, len(w.Abandoned))
	}
	// Without a hold there is no abandoned order.
	spec.HoldFor = 0
	if w := Generate(spec); len(w.Abandoned) != 0 || len(w.AtSend) != 0 {
		t.Errorf("without -hold-for: %d abandoned", len(w.Abandoned))
	}
}

// With locations, every lot is at one of them and every placement is routed: a pickup
// at a location that offers pickup, or a ship_to near a shipping location; the events
// stay valid. The same spec without locations is the workload it was: no lot names a
// location and no placement a route, and its events are those of a spec whose pickup
// share alone differs (the routes draw from their own source).
func TestGenerateSpreadsLotsAndRoutesOrdersOverLocations(t *testing.T) {
	lat, lon := 40.0, -74.0
	spec := DefaultSpec("T")
	spec.Orders, spec.WarehouseShare, spec.PickupShare = 300, 0.1, 0.2
	spec.Locations = []stock.Location{
		{ID: "wh", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true, Lat: &lat, Lon: &lon},
		{ID: "store", Kind: stock.LocationStore, Rank: 2, Pickup: true, Enabled: true, Lat: &lat, Lon: &lon},
	}
	w := Generate(spec)
	at := map[string]int{}
	for _, s := range w.Inventory {
		for _, l := range s.Lots {
			at[l.Location]++
		}
	}
	if at["wh"] == 0 || at["store"] == 0 || at["wh"]+at["store"] != spec.SKUs*spec.LotsPerSKU {
		t.Fatalf("lots by location %v", at)
	}
	var pickups, shipTo int
	for _, e := range w.Events {
		if _, err := domain.Decode(mustJSON(t, e), 0); err != nil {
			t.Fatalf("generated an invalid event: %v", err)
		}
		switch e.Type {
		case event.OrderPlaced:
			var d event.OrderData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			switch {
			case d.PickupLocation == "store":
				pickups++
			case d.ShipTo != nil && d.PickupLocation == "" && d.ShipTo.Lat >= 38 && d.ShipTo.Lat <= 42:
				shipTo++
			default:
				t.Fatalf("placement %s routed neither to the pickup store nor near the warehouse: %s", e.EventID, e.Data)
			}
		case event.InventoryLotRegistered:
			var d event.LotRegisteredData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Location != "wh" && d.Location != "store" {
				t.Fatalf("lot registered at %q", d.Location)
			}
		}
	}
	if pickups == 0 || shipTo == 0 {
		t.Fatalf("%d pickups, %d shipped to a point", pickups, shipTo)
	}

	plain := DefaultSpec("T")
	plain.Orders, plain.WarehouseShare = 300, 0.1
	other := plain
	other.PickupShare = 0.9
	a, b := Generate(plain), Generate(other)
	if string(mustJSON(t, a)) != string(mustJSON(t, b)) {
		t.Fatal("without locations, the pickup share changed the workload")
	}
	for _, e := range a.Events {
		if e.Type == event.OrderPlaced {
			var d event.OrderData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Routed() {
				t.Fatalf("placement %s routed without locations: %s", e.EventID, e.Data)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
