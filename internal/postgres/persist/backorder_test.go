package persist_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
)

// A SKU's queue survives a Redis data loss: the results of its backorders and dequeue are
// persisted (the backorders rows), the SKU's Redis keys are lost, and the SKU loaded
// again from PostgreSQL has the same waiting lines, qw and qn (the last line queued left
// the queue, so qn is more than any waiting line's seq); the next backorder comes after
// them, and a Model loaded from the same rows holds the same queue.
func TestQueueSurvivesRedisLoss(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	loader := inventorydb.PGLoader{DB: db}
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: loader})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	step := func(op stock.Op) stock.Result {
		t.Helper()
		res, err := led.Apply(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		n++
		apply(t, db, []event.Result{skuResult("e"+res.OpID, event.InventoryLotRegistered, n, res)})
		return res
	}
	back := func(op, holder, line string, qty int64, class int) stock.BackorderRequest {
		return stock.BackorderRequest{OpID: op, SKU: "BQ", Holder: holder, Line: line, Qty: qty, TargetDate: "2026-12-01",
			Mode: stock.ModeReserve, Class: class, QueuedAt: 1_700_000_000_000 + n}
	}
	step(stock.RegisterSKURequest{OpID: "s", SKU: "BQ"})
	step(stock.RegisterLotRequest{OpID: "l1", SKU: "BQ", Lot: stock.NewLot{LotID: "A", Kind: stock.KindOnHand, Good: true, Sellable: 2}})
	step(back("b1", "LC-1", "1", 5, 0))
	step(back("b2", "LC-2", "1", 4, 3))
	step(back("b3", "LC-3", "9", 1, 0))
	if r := step(stock.DequeueRequest{OpID: "d3", SKU: "BQ", Holder: "LC-3", Line: "9"}); r.Dequeued != 1 {
		t.Fatalf("dequeue %+v", r)
	}

	key := ledger.Key(prefix, "BQ")
	state := func() ([]stock.QueueEntry, []any) {
		t.Helper()
		q, err := led.Queue(ctx, "BQ")
		if err != nil {
			t.Fatal(err)
		}
		h, err := rc.HMGet(ctx, key, "qw", "qn").Result()
		if err != nil {
			t.Fatal(err)
		}
		return q, h
	}
	queue, counters := state()
	if len(queue) != 2 || queue[0].Holder != "LC-2" || !reflect.DeepEqual(counters, []any{"7", "3"}) {
		t.Fatalf("before the loss: queue %+v, qw and qn %v", queue, counters)
	}
	keys, err := rc.Keys(ctx, key+"*").Result()
	if err != nil || len(keys) < 3 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if err := rc.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := led.Load(ctx, "BQ"); err != nil {
		t.Fatal(err)
	}
	if q, c := state(); !reflect.DeepEqual(q, queue) || !reflect.DeepEqual(c, counters) {
		t.Fatalf("loaded: queue %+v, qw and qn %v; before the loss %+v, %v", q, c, queue, counters)
	}

	m := stock.NewModel(loader)
	if err := m.Load(ctx, "BQ"); err != nil {
		t.Fatal(err)
	}
	if q := m.Queue("BQ"); !reflect.DeepEqual(q, queue) {
		t.Fatalf("the model loads %+v, Redis held %+v", q, queue)
	}
	for name, inv := range map[string]ledger.Inventory{"ledger": led, "model": m} {
		r, err := inv.Apply(ctx, back("b4", "LC-4", "1", 2, 0))
		if err != nil || len(r.Queue) != 1 || r.Queue[0].Seq != 4 || r.Position != 3 {
			t.Fatalf("%s: a backorder after the load %+v %v, want seq 4 at position 3", name, r, err)
		}
	}
}

// A waiting line's row keeps the newest SKU version's state: the dequeue's row (want 0)
// stays when the backorder's older result arrives after it, so the line does not wait
// again once loaded; a newer result replaces it.
func TestOlderResultDoesNotOverwriteBackorder(t *testing.T) {
	db := testenv.Postgres(t)
	entry := func(want int64) event.QueueEntry {
		return event.QueueEntry{Holder: "LC-1", Line: "1", Want: want, Mode: stock.ModeShip, TargetDate: "2026-12-01", Class: 2, Seq: 7, QueuedAt: 5}
	}
	result := func(id string, version int64, e event.QueueEntry) event.Result {
		return event.Result{EventID: id, Entity: "LC-1", LCID: "LC-1", Seq: version, Type: event.OrderPlaced, Outcome: event.Applied,
			ProcessedAt: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
			SKUs:        []stock.SKU{{SKU: "BO", Version: version, Lots: []stock.Lot{}, Queue: []event.QueueEntry{e}}}}
	}
	stored := func() (want, version int64) {
		t.Helper()
		var rs []struct{ Want, Version int64 }
		if err := db.Raw(`SELECT want, version FROM backorders WHERE sku = 'BO' AND holder = 'LC-1' AND line = '1'`).Scan(&rs).Error; err != nil || len(rs) != 1 {
			t.Fatalf("rows %+v %v", rs, err)
		}
		return rs[0].Want, rs[0].Version
	}
	apply(t, db, []event.Result{result("dequeued", 5, entry(0))})
	rep := apply(t, db, []event.Result{result("queued", 4, entry(3))})
	if want, v := stored(); want != 0 || v != 5 || rep.Skips.OlderBackorders != 1 {
		t.Fatalf("after the older result: want %d at version %d, %d skipped", want, v, rep.Skips.OlderBackorders)
	}
	s, err := inventorydb.PGLoader{DB: db}.LoadSKU(context.Background(), "BO")
	if err != nil || s.Queue != nil || s.QueueSeq != 7 {
		t.Fatalf("loaded queue %+v, last seq %d, %v: want none waiting, 7", s.Queue, s.QueueSeq, err)
	}
	// Both results in one batch: the newer wins whatever the order.
	apply(t, db, []event.Result{result("queued-again", 6, entry(2)), result("dequeued-again", 7, entry(0))})
	if want, v := stored(); want != 0 || v != 7 {
		t.Fatalf("after one batch: want %d at version %d", want, v)
	}
}
