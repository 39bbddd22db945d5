package persist_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/persist"
	"github.com/junban/junban/internal/persist/resultgen"
	"github.com/junban/junban/internal/testenv"
)

// orders is an OrderSource over a map: the order package's Redis state is not what
// this test is about.
type orders map[string]struct {
	snap *event.OrderSnapshot
	seq  int64
}

func (o orders) Order(_ context.Context, lcid string) (*event.OrderSnapshot, int64, error) {
	e, ok := o[lcid]
	if !ok {
		return nil, 0, errors.New("no such order")
	}
	return e.snap, e.seq, nil
}

func (o orders) ScanOrders(_ context.Context, fn func(string) error) error {
	for k := range o {
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}

func drifts(rep persist.ReconcileReport) []string {
	var out []string
	for _, d := range rep.Drifts {
		s := d.Entity + " " + d.Key + " " + string(d.Kind)
		if d.Repaired {
			s += " repaired"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Drift planted between the ledger in Redis and PostgreSQL is reported, and a repair
// rewrites PostgreSQL where Redis is newer (and only there).
func TestReconcileReportsAndRepairsDrift(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	rc, prefix := testenv.Redis(t)
	cfg := resultgen.Config{Seed: 4, SKUs: 3, LotsPerSKU: 2}
	catalog := resultgen.Catalog(cfg)
	if _, err := persist.WriteSKUs(ctx, db, catalog); err != nil {
		t.Fatal(err)
	}
	led := ledger.New(rc, prefix, ledger.PGLoader{DB: db}, ledger.Config{})
	for _, s := range catalog {
		if err := led.Load(ctx, s.SKU); err != nil {
			t.Fatal(err)
		}
	}
	// SKU 0 moves on in Redis without its result reaching PostgreSQL: behind.
	target := time.Now().AddDate(0, 0, 2).Format(time.DateOnly)
	if _, err := led.Allocate(ctx, ledger.AllocateRequest{OpID: "op-1", SKU: catalog[0].SKU, Qty: 3, TargetDate: target, Mode: ledger.ModeShip}); err != nil {
		t.Fatal(err)
	}
	// SKU 1 is changed in PostgreSQL behind the ledger's back: diverged.
	if err := db.Exec(`UPDATE lots SET sellable = sellable - 1 WHERE sku = ? AND lot_id = 'L00'`, catalog[1].SKU).Error; err != nil {
		t.Fatal(err)
	}
	// Orders: one never persisted, one behind, one in step.
	placed := &event.OrderSnapshot{LCID: "LC-B", Status: event.StatusPlaced, Allocation: "allocated", Mode: ledger.ModeShip,
		TargetDate: target, Lines: []event.SnapshotLine{{LineID: "1", SKU: catalog[0].SKU, Qty: 3, Lots: []ledger.LotQty{{LotID: "L00", Qty: 3}}}}}
	paid := *placed
	paid.Paid = true
	same := *placed
	same.LCID = "LC-C"
	missing := *placed
	missing.LCID = "LC-A"
	persisted := []event.Result{
		{EventID: "e-b1", Entity: "LC-B", LCID: "LC-B", Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied, Order: placed},
		{EventID: "e-c1", Entity: "LC-C", LCID: "LC-C", Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied, Order: &same},
	}
	if _, err := persist.Apply(ctx, db, persisted); err != nil {
		t.Fatal(err)
	}
	src := orders{}
	src["LC-A"] = struct {
		snap *event.OrderSnapshot
		seq  int64
	}{&missing, 1}
	src["LC-B"] = struct {
		snap *event.OrderSnapshot
		seq  int64
	}{&paid, 2}
	src["LC-C"] = struct {
		snap *event.OrderSnapshot
		seq  int64
	}{&same, 1}

	run := func(repair bool) persist.ReconcileReport {
		t.Helper()
		var calls, total int
		rep, err := persist.Reconcile(ctx, persist.ReconcileConfig{
			DB: db, SKUs: led, Orders: src, Repair: repair,
			Progress: func(done, n int) { calls, total = done, n },
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rep.Drifts {
			t.Logf("repair=%v: %s", repair, d)
		}
		if rep.SKUs != 3 || rep.Orders != 3 || calls != 6 || total != 6 {
			t.Errorf("compared %d skus and %d orders, progress %d/%d; want 3, 3, 6/6", rep.SKUs, rep.Orders, calls, total)
		}
		return rep
	}

	rep := run(false)
	want := []string{
		"order LC-A missing",
		"order LC-B behind",
		"sku " + catalog[0].SKU + " behind",
		"sku " + catalog[1].SKU + " diverged",
	}
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("drifts = %q, want %q", got, want)
	}
	if rep.Remaining() != 4 {
		t.Errorf("remaining = %d, want 4", rep.Remaining())
	}
	for _, d := range rep.Drifts {
		if d.Key == catalog[1].SKU && !strings.Contains(d.String(), "lot L00 sellable") {
			t.Errorf("the diverged SKU's report does not name the lot and bucket: %s", d)
		}
	}

	rep = run(true)
	want = []string{
		"order LC-A missing repaired",
		"order LC-B behind repaired",
		"sku " + catalog[0].SKU + " behind repaired",
		"sku " + catalog[1].SKU + " diverged",
	}
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("after repair: drifts = %q, want %q", got, want)
	}
	if rep.Remaining() != 1 {
		t.Errorf("remaining after repair = %d, want 1 (the diverged SKU is never repaired)", rep.Remaining())
	}

	rep = run(false)
	want = []string{"sku " + catalog[1].SKU + " diverged"}
	if got := drifts(rep); !slices.Equal(got, want) {
		t.Fatalf("second look: drifts = %q, want %q", got, want)
	}
}
