package persist_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/persist"
)

// The warehouse's operations done in Redis with their results not persisted are drift
// of each new kind: a damage (the defective bucket), a recall (the good flag and the
// defective bucket), a registered lot (no lot row), a registered SKU (no skus row), and a
// safety stock change whose result is queued while a later operation's was persisted
// (the skus row at Redis's version, its safety stock set at an older one). Each is
// reported behind (the SKU missing), repaired to Redis's state, and then clean; the late
// results arriving after the repair change nothing. A safety stock or a defective
// bucket changed in PostgreSQL at Redis's version is diverged and never repaired.
// (Fails with the safety stock judged by skus.version, as before: the queued change is
// "diverged", and --repair leaves it; and without the defective column loaded, the damage
// is no drift at all.)
func TestReconcileWarehouseDrift(t *testing.T) {
	ctx := context.Background()
	db, led, catalog := loadedCatalog(t, 6, 2)
	damaged, recalled, newLot, newSS, tamperedSS, tamperedDefective :=
		catalog[0].SKU, catalog[1].SKU, catalog[2].SKU, catalog[3].SKU, catalog[4].SKU, catalog[5].SKU
	const newSKU = "SKU-NEW"
	must := func(res stock.Result, err error) stock.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var late []event.Result // the results still queued, persisted after the repair
	queued := func(typ event.Type, res stock.Result) {
		late = append(late, skuResult("late-"+res.OpID, typ, res.Version, res))
	}
	queued(event.InventoryDamaged, must(led.Apply(ctx, stock.DamageRequest{OpID: "op-damage", SKU: damaged, LotID: "L00", Qty: 3, Reason: "crushed"})))
	queued(event.InventoryLotRecalled, must(led.Apply(ctx, stock.RecallRequest{OpID: "op-recall", SKU: recalled, LotID: "L00", Reason: "recall"})))
	queued(event.InventoryLotRegistered, must(led.Apply(ctx, stock.RegisterLotRequest{OpID: "op-reglot", SKU: newLot, Lot: stock.NewLot{
		LotID: "L-NEW", Kind: stock.KindPlanned, Good: true, ArrivesAt: "2027-03-01", Sellable: 40}})))
	queued(event.InventorySKURegistered, must(led.Apply(ctx, stock.RegisterSKURequest{OpID: "op-regsku", SKU: newSKU, SafetyStock: 6})))
	ss := must(led.Apply(ctx, stock.SafetyStockRequest{OpID: "op-ss", SKU: newSS, SafetyStock: catalog[3].SafetyStock + 10}))
	queued(event.InventorySafetyStockChanged, ss)
	persistOp(t, db, adjust(t, led, "op-after-ss", newSS, "L00"))
	// Changed in PostgreSQL behind the ledger's back, at Redis's version.
	if err := db.Exec(`UPDATE skus SET safety_stock = safety_stock + 1 WHERE sku = ?`, tamperedSS).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`UPDATE lots SET defective = 2 WHERE sku = ? AND lot_id = 'L01'`, tamperedDefective).Error; err != nil {
		t.Fatal(err)
	}

	wantDetails := map[string]string{
		damaged:           "lot L00 behind (postgres row v1): sellable redis=999997 postgres=1000000, defective redis=3 postgres=0",
		recalled:          "lot L00 behind (postgres row v1): good redis=false postgres=true, sellable redis=0 postgres=1000000, defective redis=1000000 postgres=0",
		newLot:            "lot L-NEW behind: not in postgres",
		newSS:             fmt.Sprintf("safety_stock behind (postgres set at v1): redis=%d postgres=%d", catalog[3].SafetyStock+10, catalog[3].SafetyStock),
		tamperedSS:        fmt.Sprintf("safety_stock diverged (postgres set at v1): redis=%d postgres=%d", catalog[4].SafetyStock, catalog[4].SafetyStock+1),
		tamperedDefective: "lot L01 diverged (postgres row v1): defective redis=0 postgres=2",
	}
	want := []string{
		"sku " + newSKU + " missing",
		"sku " + damaged + " behind",
		"sku " + recalled + " behind",
		"sku " + newLot + " behind",
		"sku " + newSS + " behind",
		"sku " + tamperedSS + " diverged",
		"sku " + tamperedDefective + " diverged",
	}
	slices.Sort(want)
	rep := reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led})
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("drifts = %q, want %q", got, want)
	}
	for _, d := range rep.Drifts {
		if w, ok := wantDetails[d.Key]; ok && !slices.Contains(d.Details, w) {
			t.Errorf("%s: details %q, want %q among them", d.Key, d.Details, w)
		}
		if d.Key == newSS && (d.Postgres != d.Redis || len(d.Details) != 1) {
			t.Errorf("%s: want the skus row at Redis's version and only the safety stock behind", d)
		}
	}

	rep = reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Repair: true})
	for i, w := range want {
		if !strings.HasSuffix(w, " diverged") {
			want[i] += " repaired"
		}
	}
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("after the repair: drifts = %q, want %q", got, want)
	}
	// The repaired rows are Redis's state, as the loader reads them back.
	for _, sku := range []string{newSKU, damaged, recalled, newLot, newSS} {
		r, err := led.Snapshot(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		p, err := inventorydb.PGLoader{DB: db}.LoadSKU(ctx, sku)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p) != fmt.Sprint(r) {
			t.Errorf("%s after the repair:\npostgres %+v\nredis    %+v", sku, p, r)
		}
	}

	// The queued results arrive late: the version guards keep the repaired rows.
	apply(t, db, late)
	rep = reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led})
	want = []string{"sku " + tamperedSS + " diverged", "sku " + tamperedDefective + " diverged"}
	slices.Sort(want)
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("after the late results: drifts = %q, want %q", got, want)
	}
}

// Returned units are part of an order's lines: an order.returned result not persisted is
// an order behind with its lines differing, and a repair writes them.
func TestReconcileOrderReturned(t *testing.T) {
	db, led, catalog := loadedCatalog(t, 1, 1)
	line := event.SnapshotLine{LineID: "1", SKU: catalog[0].SKU, Qty: 2, Lots: []stock.LotQty{{LotID: "L00", Qty: 2}}}
	shipped := &event.OrderSnapshot{LCID: "LC-R", Status: event.StatusShipped, Allocation: "allocated", Mode: stock.ModeShip,
		Lines: []event.SnapshotLine{line}}
	apply(t, db, []event.Result{{EventID: "e-ship", Entity: "LC-R", LCID: "LC-R", Seq: 3, Type: event.OrderShipped,
		Outcome: event.Applied, Order: shipped}})
	returned := *shipped
	line.Returned = []stock.LotQty{{LotID: "L00", Qty: 1}}
	returned.Lines = []event.SnapshotLine{line}
	src := orders{"LC-R": {&returned, 4}}

	rep := reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Orders: src})
	if got, want := drifts(rep), []string{"order LC-R behind"}; !slices.Equal(got, want) {
		t.Fatalf("drifts = %q, want %q", got, want)
	}
	if !strings.Contains(rep.Drifts[0].String(), `"returned":[{"lot_id":"L00","qty":1}]`) {
		t.Errorf("%s: the lines do not show the returned units", rep.Drifts[0])
	}
	rep = reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Orders: src, Repair: true})
	if got, want := drifts(rep), []string{"order LC-R behind repaired"}; !slices.Equal(got, want) {
		t.Fatalf("after the repair: drifts = %q, want %q", got, want)
	}
	if rep = reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Orders: src}); len(rep.Drifts) != 0 {
		t.Fatalf("after the repair: drifts = %q, want none", drifts(rep))
	}
}
