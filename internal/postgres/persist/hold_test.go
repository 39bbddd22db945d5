package persist_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// holdOrder is a placed reserve-mode order of one line whose hold ends at hold (nil:
// none).
func holdOrder(lcid, status string, hold *time.Time) *event.OrderSnapshot {
	alloc := "reserved"
	if status != event.StatusPlaced {
		alloc = ""
	}
	var lots []stock.LotQty
	if alloc != "" {
		lots = []stock.LotQty{{LotID: "L1", Qty: 2}}
	}
	return &event.OrderSnapshot{LCID: lcid, Status: status, Allocation: alloc, Mode: stock.ModeReserve,
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "S", Qty: 2, Lots: lots}}, HoldUntil: hold}
}

// orderHold reads an order's status and hold_until ("-" for none) as PostgreSQL holds them.
func orderHold(t *testing.T, apply func([]event.Result), read func(string) (string, *time.Time), lcid string, rs []event.Result) string {
	t.Helper()
	apply(rs)
	status, hold := read(lcid)
	if hold == nil {
		return status + " -"
	}
	return status + " " + hold.UTC().Format(time.RFC3339Nano)
}

// A placed reserve order's hold_until is persisted to the microsecond, moves with an
// order.reservation_extended, and goes with the order.reservation_expired that makes the
// order expired and records its release moves; an older result arriving late (the
// extension after the expiry) changes nothing, and the expired order leaves the due
// holds' index.
func TestApplyHoldUntil(t *testing.T) {
	db := testenv.Postgres(t)
	hold := time.Date(2026, 12, 3, 9, 0, 0, 123456789, time.UTC)
	later := hold.Add(time.Hour)
	read := func(lcid string) (string, *time.Time) {
		var row persist.OrderRow
		if err := db.Where("lcid = ?", lcid).Take(&row).Error; err != nil {
			t.Fatal(err)
		}
		return row.Status, row.HoldUntil
	}
	do := func(rs []event.Result) { apply(t, db, rs) }
	placed := event.Result{EventID: "e-1", Entity: "LC-H", LCID: "LC-H", Seq: 1, Type: event.OrderPlaced,
		Outcome: event.Applied, ProcessedAt: hold.Add(-time.Hour), Order: holdOrder("LC-H", event.StatusPlaced, &hold)}
	if got, want := orderHold(t, do, read, "LC-H", []event.Result{placed}), "placed 2026-12-03T09:00:00.123456Z"; got != want {
		t.Errorf("placed: %q, want %q (truncated to the microsecond)", got, want)
	}
	extended := event.Result{EventID: "e-2", Entity: "LC-H", LCID: "LC-H", Seq: 2, Type: event.OrderReservationExtended,
		Outcome: event.Applied, ProcessedAt: hold, Order: holdOrder("LC-H", event.StatusPlaced, &later)}
	expired := event.Result{EventID: event.ExpiryEventID("LC-H", later), Entity: "LC-H", LCID: "LC-H", Seq: 3,
		Type: event.OrderReservationExpired, Outcome: event.Applied, ProcessedAt: later,
		Order: holdOrder("LC-H", event.StatusExpired, nil),
		Moves: []stock.Move{{OpID: "LC-H:1:release", SKU: "S", LotID: "L1", From: "reserved", To: "sellable", Qty: 2, Version: 9}}}
	// The expiry first, then the extension it followed: the newer seq stays.
	if got, want := orderHold(t, do, read, "LC-H", []event.Result{expired}), "expired -"; got != want {
		t.Errorf("expired: %q, want %q", got, want)
	}
	if got, want := orderHold(t, do, read, "LC-H", []event.Result{extended}), "expired -"; got != want {
		t.Errorf("the extension arriving after the expiry: %q, want %q", got, want)
	}
	var moves []string
	if err := db.Raw(`SELECT event_id || ' ' || from_bucket || '>' || to_bucket || ' ' || qty FROM moves WHERE entity = 'LC-H'`).Scan(&moves).Error; err != nil {
		t.Fatal(err)
	}
	if want := []string{expired.EventID + " reserved>sellable 2"}; !slices.Equal(moves, want) {
		t.Errorf("moves %q, want %q", moves, want)
	}

	// The extension in its turn on another order: the hold moves.
	other := placed
	other.EventID, other.Entity, other.LCID, other.Order = "e-o1", "LC-O", "LC-O", holdOrder("LC-O", event.StatusPlaced, &hold)
	ext := extended
	ext.EventID, ext.Entity, ext.LCID, ext.Order = "e-o2", "LC-O", "LC-O", holdOrder("LC-O", event.StatusPlaced, &later)
	if got, want := orderHold(t, do, read, "LC-O", []event.Result{other, ext}), "placed 2026-12-03T10:00:00.123456Z"; got != want {
		t.Errorf("extended: %q, want %q", got, want)
	}

	// The due holds' index covers placed orders with a hold, and only them.
	var due []string
	if err := db.Raw(`SELECT lcid FROM orders WHERE status = 'placed' AND hold_until IS NOT NULL ORDER BY hold_until, lcid`).Scan(&due).Error; err != nil {
		t.Fatal(err)
	}
	if want := []string{"LC-O"}; !slices.Equal(due, want) {
		t.Errorf("placed holds %q, want %q", due, want)
	}
	var def string
	if err := db.Raw(`SELECT pg_get_indexdef('orders_hold_due'::regclass)`).Scan(&def).Error; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "WHERE ((status = 'placed'::text) AND (hold_until IS NOT NULL))") {
		t.Errorf("orders_hold_due: %s", def)
	}
}

// Reconcile compares hold_until to the microsecond: a hold that moved in Redis without its
// result reaching PostgreSQL at the same seq is a divergence naming hold_until, a hold
// that differs below the microsecond is none, and a repair writes Redis's hold.
func TestReconcileHoldUntil(t *testing.T) {
	db, led, _ := loadedCatalog(t, 1, 1)
	hold := time.Date(2026, 12, 3, 9, 0, 0, 123456000, time.UTC)
	var rs []event.Result
	for _, lcid := range []string{"LC-SAME", "LC-MOVED", "LC-BEHIND"} {
		rs = append(rs, event.Result{EventID: "e-" + lcid, Entity: lcid, LCID: lcid, Seq: 1, Type: event.OrderPlaced,
			Outcome: event.Applied, Order: holdOrder(lcid, event.StatusPlaced, &hold)})
	}
	apply(t, db, rs)
	sub := hold.Add(400 * time.Nanosecond)
	moved, later := hold.Add(time.Second), hold.Add(time.Hour)
	src := orders{
		"LC-SAME":   {holdOrder("LC-SAME", event.StatusPlaced, &sub), 1},
		"LC-MOVED":  {holdOrder("LC-MOVED", event.StatusPlaced, &moved), 1},
		"LC-BEHIND": {holdOrder("LC-BEHIND", event.StatusPlaced, &later), 2},
	}
	rep := reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Orders: src})
	if got, want := drifts(rep), []string{"order LC-BEHIND behind", "order LC-MOVED diverged"}; !slices.Equal(got, want) {
		t.Fatalf("drifts %q, want %q", got, want)
	}
	for _, d := range rep.Drifts {
		if d.Key == "LC-MOVED" && !strings.Contains(d.String(), "hold_until: redis=2026-12-03T09:00:01.123456Z postgres=2026-12-03T09:00:00.123456Z") {
			t.Errorf("the divergence does not name hold_until: %s", d)
		}
	}
	reconcile(t, persist.ReconcileConfig{DB: db, SKUs: led, Orders: src, Repair: true})
	var row persist.OrderRow
	if err := db.Where("lcid = ?", "LC-BEHIND").Take(&row).Error; err != nil {
		t.Fatal(err)
	}
	if row.HoldUntil == nil || !row.HoldUntil.Equal(later) {
		t.Errorf("repaired hold_until %v, want %v", row.HoldUntil, later)
	}
}

// ScanHolds passes every placed order with a hold, soonest first, across pages (more
// than one page of holds, some ending at the same instant), and no other order.
func TestScanHolds(t *testing.T) {
	db := testenv.Postgres(t)
	base := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	n := 2500
	if err := db.Exec(`INSERT INTO orders (lcid, status, hold_until, seq, last_event_id)
SELECT 'LC-' || lpad(i::text, 5, '0'), 'placed', ?::timestamptz + (i / 3) * interval '1 second', 1, 'e'
FROM generate_series(1, ?) AS i`, base, n).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO orders (lcid, status, hold_until, seq, last_event_id) VALUES
('LC-NOHOLD', 'placed', NULL, 1, 'e'), ('LC-EXP', 'expired', NULL, 1, 'e'), ('LC-SHIP', 'shipped', NULL, 1, 'e')`).Error; err != nil {
		t.Fatal(err)
	}
	var got []persist.Hold
	count, err := persist.ScanHolds(context.Background(), db, func(h persist.Hold) error {
		got = append(got, h)
		return nil
	})
	if err != nil || count != n || len(got) != n {
		t.Fatalf("scanned %d (%d passed), %v; want %d", count, len(got), err, n)
	}
	for i, h := range got {
		want := fmt.Sprintf("LC-%05d", i+1)
		if h.LCID != want || !h.HoldUntil.Equal(base.Add(time.Duration((i+1)/3)*time.Second)) {
			t.Fatalf("hold %d: %+v, want %s", i, h, want)
		}
	}
}
