package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// wevent builds an event of the warehouse's feed (or of an order, with lcid).
func wevent(id string, typ event.Type, lcid string, data any) event.Order {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	return event.Order{EventID: id, Type: typ, LCID: lcid, OccurredAt: time.Now().UTC(), Data: b}
}

// do sends events one after the other, each once the one before has its result (a SKU's
// events and an order's run in different turns, so the test orders them itself), and
// returns the results by event id.
func (f *fleet) do(events ...event.Order) map[string]event.Result {
	f.t.Helper()
	out := map[string]event.Result{}
	for _, e := range events {
		f.send([]event.Order{e})
		f.collect(map[string]bool{e.EventID: true}, time.Minute, nil)
		out[e.EventID] = f.results[e.EventID][0]
	}
	return out
}

func (f *fleet) snapshot(sku string) stock.SKU {
	f.t.Helper()
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := led.Snapshot(context.Background(), sku)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func lotOf(s stock.SKU, id string) stock.Lot {
	for _, l := range s.Lots {
		if l.LotID == id {
			return l
		}
	}
	return stock.Lot{}
}

func wantOutcome(t *testing.T, rs map[string]event.Result, id, outcome, reason string) event.Result {
	t.Helper()
	r, ok := rs[id]
	if !ok {
		t.Fatalf("%s: no result", id)
	}
	if r.Outcome != outcome || r.Reason != reason {
		t.Fatalf("%s: %s/%s (%s), want %s/%s", id, r.Outcome, r.Reason, r.Detail, outcome, reason)
	}
	return r
}

func movesOf(r event.Result) string {
	var out []string
	for _, m := range r.Moves {
		out = append(out, fmt.Sprintf("%s:%s>%s:%d", m.LotID, m.From, m.To, m.Qty))
	}
	return fmt.Sprint(out)
}

// Every type of the warehouse's feed through the real queue and the order-worker binary:
// applied, sent again (no second effect), and each way it is rejected; a lot registered on
// a live SKU is taken next in the order FEFO/LIFO requires; the results reach PostgreSQL.
func TestWarehouseEventsThroughTheQueue(t *testing.T) {
	f := newFleet(t)
	w := loadgen.Workload{Inventory: []stock.SKU{
		{SKU: "A", Lots: []stock.Lot{
			{LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: 20},
			{LotID: "P1", Kind: stock.KindPlanned, Good: true, RegSeq: 2, ArrivesAt: "2026-12-20", ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: 5},
		}},
		{SKU: "B", Lots: []stock.Lot{}}, // in PostgreSQL, never loaded into Redis
	}}
	f.seed(w)
	f.start(1)
	ctx := context.Background()
	type M = map[string]any

	// SKUs: a new one, again, and two that exist (one in Redis, one only in PostgreSQL).
	rs := f.do(
		wevent("touch-a", event.InventoryAdjusted, "", M{"sku": "A", "lot_id": "L1", "delta": 1, "reason": "count"}),
		wevent("sku-new", event.InventorySKURegistered, "", M{"sku": "NEW", "safety_stock": 2}),
		wevent("sku-a", event.InventorySKURegistered, "", M{"sku": "A", "safety_stock": 1}),
		wevent("sku-b", event.InventorySKURegistered, "", M{"sku": "B", "safety_stock": 1}),
	)
	r := wantOutcome(t, rs, "sku-new", event.Applied, "")
	if len(r.SKUs) != 1 || r.SKUs[0].SKU != "NEW" || r.SKUs[0].Version != 1 || r.SKUs[0].SafetyStock != 2 {
		t.Fatalf("sku-new: %+v", r.SKUs)
	}
	wantOutcome(t, rs, "sku-a", event.Rejected, "ERR_SKU_EXISTS")
	wantOutcome(t, rs, "sku-b", event.Rejected, "ERR_SKU_EXISTS")
	all := []event.Result{rs["touch-a"], rs["sku-new"], rs["sku-a"], rs["sku-b"]}

	// Lots: on hand and planned on the new SKU, a planned one on the live SKU A, and the
	// refusals. Then an order on A takes L1 (FEFO) and then the newest planned lot, P2.
	rs = f.do(
		wevent("lot-n1", event.InventoryLotRegistered, "", M{"sku": "NEW", "lot_id": "N1", "kind": "onhand", "best_before": "2027-03-01", "sellable": 4}),
		wevent("lot-n2", event.InventoryLotRegistered, "", M{"sku": "NEW", "lot_id": "N2", "kind": "planned", "arrives_at": "2026-12-24", "sellable": 6}),
		wevent("lot-p2", event.InventoryLotRegistered, "", M{"sku": "A", "lot_id": "P2", "kind": "planned", "arrives_at": "2027-01-10", "valid_from": "2026-01-01", "valid_to": "2027-12-31", "sellable": 3}),
		wevent("lot-dup", event.InventoryLotRegistered, "", M{"sku": "A", "lot_id": "L1", "kind": "onhand", "sellable": 1}),
		wevent("lot-nosku", event.InventoryLotRegistered, "", M{"sku": "ZZZ", "lot_id": "Z1", "kind": "onhand", "sellable": 1}),
		wevent("o1-placed", event.OrderPlaced, "o1", M{"mode": "reserve", "target_date": "2026-12-01", "lines": []M{{"line_id": "l1", "sku": "A", "qty": 23}}}),
	)
	r = wantOutcome(t, rs, "lot-p2", event.Applied, "")
	if p2 := lotOf(r.SKUs[0], "P2"); p2.RegSeq != 3 || p2.Sellable != 3 || p2.Kind != stock.KindPlanned || p2.ValidTo != "2027-12-31" {
		t.Fatalf("lot-p2: %+v", r.SKUs)
	}
	wantOutcome(t, rs, "lot-n1", event.Applied, "")
	wantOutcome(t, rs, "lot-n2", event.Applied, "")
	wantOutcome(t, rs, "lot-dup", event.Rejected, "ERR_LOT_EXISTS")
	wantOutcome(t, rs, "lot-nosku", event.Rejected, "ERR_UNKNOWN_SKU")
	r = wantOutcome(t, rs, "o1-placed", event.Applied, "")
	if got, want := movesOf(r), "[L1:sellable>reserved:21 P2:sellable>reserved:2]"; got != want {
		t.Fatalf("o1 moves %s, want %s (FEFO, then the newest planned lot)", got, want)
	}
	for _, id := range []string{"lot-n1", "lot-n2", "lot-p2", "lot-dup", "lot-nosku", "o1-placed"} {
		all = append(all, rs[id])
	}

	// Safety stock, holds, damage: applied and refused.
	rs = f.do(
		wevent("ss-a", event.InventorySafetyStockChanged, "", M{"sku": "A", "safety_stock": 5}),
		wevent("ss-nosku", event.InventorySafetyStockChanged, "", M{"sku": "ZZZ", "safety_stock": 5}),
		wevent("hold", event.InventoryHeld, "", M{"sku": "NEW", "lot_id": "N1", "qty": 3, "reason": "inspection"}),
		wevent("hold-much", event.InventoryHeld, "", M{"sku": "NEW", "lot_id": "N1", "qty": 5, "reason": "inspection"}),
		wevent("hold-nolot", event.InventoryHeld, "", M{"sku": "NEW", "lot_id": "NX", "qty": 1, "reason": "inspection"}),
		wevent("unhold", event.InventoryReleasedHold, "", M{"sku": "NEW", "lot_id": "N1", "qty": 2, "reason": "inspection passed"}),
		wevent("unhold-much", event.InventoryReleasedHold, "", M{"sku": "NEW", "lot_id": "N1", "qty": 2, "reason": "inspection passed"}),
		wevent("damage", event.InventoryDamaged, "", M{"sku": "NEW", "lot_id": "N1", "qty": 1, "reason": "crushed"}),
		wevent("damage-much", event.InventoryDamaged, "", M{"sku": "NEW", "lot_id": "N1", "qty": 100, "reason": "crushed"}),
	)
	r = wantOutcome(t, rs, "ss-a", event.Applied, "")
	if r.SKUs[0].SafetyStock != 5 {
		t.Fatalf("ss-a: %+v", r.SKUs)
	}
	wantOutcome(t, rs, "ss-nosku", event.Rejected, "ERR_UNKNOWN_SKU")
	if r := wantOutcome(t, rs, "hold", event.Applied, ""); movesOf(r) != "[N1:sellable>hidden:3]" {
		t.Fatalf("hold moves %s", movesOf(r))
	}
	wantOutcome(t, rs, "hold-much", event.Rejected, "ERR_INSUFFICIENT")
	wantOutcome(t, rs, "hold-nolot", event.Rejected, "ERR_UNKNOWN_LOT")
	if r := wantOutcome(t, rs, "unhold", event.Applied, ""); movesOf(r) != "[N1:hidden>sellable:2]" {
		t.Fatalf("unhold moves %s", movesOf(r))
	}
	wantOutcome(t, rs, "unhold-much", event.Rejected, "ERR_INSUFFICIENT")
	if r := wantOutcome(t, rs, "damage", event.Applied, ""); movesOf(r) != "[N1:sellable>defective:1]" {
		t.Fatalf("damage moves %s", movesOf(r))
	}
	wantOutcome(t, rs, "damage-much", event.Rejected, "ERR_INSUFFICIENT")
	for _, r := range rs {
		all = append(all, r)
	}
	if n1 := lotOf(f.snapshot("NEW"), "N1"); n1.Sellable != 2 || n1.Hidden != 1 || n1.Defective != 1 {
		t.Fatalf("N1 after holds and damage: %+v", n1)
	}

	// A recall of P2 lists o1, which holds 2 of it; a shipped order's returns.
	rs = f.do(
		wevent("recall", event.InventoryLotRecalled, "", M{"sku": "A", "lot_id": "P2", "reason": "supplier recall"}),
		wevent("recall-nolot", event.InventoryLotRecalled, "", M{"sku": "A", "lot_id": "PX", "reason": "supplier recall"}),
		wevent("o2-placed", event.OrderPlaced, "o2", M{"mode": "ship", "target_date": "2026-12-01", "lines": []M{{"line_id": "l1", "sku": "NEW", "qty": 2}}}),
		wevent("o2-paid", event.PaymentConfirmed, "o2", M{}),
		wevent("o2-shipped", event.OrderShipped, "o2", M{}),
		wevent("ret-good", event.OrderReturned, "o2", M{"lines": []M{{"line_id": "l1", "qty": 1}}}),
		wevent("ret-bad", event.OrderReturned, "o2", M{"lines": []M{{"line_id": "l1", "qty": 1}}, "defective": true}),
		wevent("ret-much", event.OrderReturned, "o2", M{"lines": []M{{"line_id": "l1", "qty": 1}}}),
		wevent("ret-noline", event.OrderReturned, "o2", M{"lines": []M{{"line_id": "l9", "qty": 1}}}),
		wevent("o3-placed", event.OrderPlaced, "o3", M{"mode": "reserve", "target_date": "2026-12-01", "lines": []M{{"line_id": "l1", "sku": "A", "qty": 1}}}),
		wevent("o3-cancelled", event.OrderCancelled, "o3", M{}),
		wevent("ret-cancelled", event.OrderReturned, "o3", M{"lines": []M{{"line_id": "l1", "qty": 1}}}),
	)
	r = wantOutcome(t, rs, "recall", event.Applied, "")
	if r.HolderCount != 1 || len(r.Holders) != 1 || r.Holders[0] != (stock.Holder{LCID: "o1", LotID: "P2", Qty: 2}) {
		t.Fatalf("recall holders %+v (count %d)", r.Holders, r.HolderCount)
	}
	if got := movesOf(r); got != "[P2:sellable>defective:1]" {
		t.Fatalf("recall moves %s", got)
	}
	wantOutcome(t, rs, "recall-nolot", event.Rejected, "ERR_UNKNOWN_LOT")
	wantOutcome(t, rs, "o2-shipped", event.Applied, "")
	if r := wantOutcome(t, rs, "ret-good", event.Applied, ""); movesOf(r) != "[N1:shipped>sellable:1]" {
		t.Fatalf("ret-good moves %s", movesOf(r))
	}
	r = wantOutcome(t, rs, "ret-bad", event.Applied, "")
	if movesOf(r) != "[N1:shipped>defective:1]" || r.Order.Status != event.StatusShipped ||
		jsonOf(r.Order.Lines[0].Returned) != `[{"lot_id":"N1","qty":2}]` {
		t.Fatalf("ret-bad: moves %s order %s", movesOf(r), jsonOf(r.Order))
	}
	wantOutcome(t, rs, "ret-much", event.Rejected, domain.ReasonReturnExceedsShipped)
	wantOutcome(t, rs, "ret-noline", event.Rejected, domain.ReasonUnknownLine)
	wantOutcome(t, rs, "ret-cancelled", event.Rejected, domain.ReasonInvalidTransition)
	for _, r := range rs {
		all = append(all, r)
	}

	// Sent again, every event is a duplicate: no stock moves, the versions stay.
	before := map[string]stock.SKU{"A": f.snapshot("A"), "NEW": f.snapshot("NEW")}
	again := []event.Order{
		wevent("sku-new", event.InventorySKURegistered, "", M{"sku": "NEW", "safety_stock": 2}),
		wevent("lot-p2", event.InventoryLotRegistered, "", M{"sku": "A", "lot_id": "P2", "kind": "planned", "arrives_at": "2027-01-10", "valid_from": "2026-01-01", "valid_to": "2027-12-31", "sellable": 3}),
		wevent("ss-a", event.InventorySafetyStockChanged, "", M{"sku": "A", "safety_stock": 5}),
		wevent("hold", event.InventoryHeld, "", M{"sku": "NEW", "lot_id": "N1", "qty": 3, "reason": "inspection"}),
		wevent("damage", event.InventoryDamaged, "", M{"sku": "NEW", "lot_id": "N1", "qty": 1, "reason": "crushed"}),
		wevent("recall", event.InventoryLotRecalled, "", M{"sku": "A", "lot_id": "P2", "reason": "supplier recall"}),
		wevent("ret-good", event.OrderReturned, "o2", M{"lines": []M{{"line_id": "l1", "qty": 1}}}),
		wevent("touch-again", event.InventoryAdjusted, "", M{"sku": "A", "lot_id": "L1", "delta": 1, "reason": "count"}),
	}
	f.send(again)
	f.collect(map[string]bool{"touch-again": true}, time.Minute, nil)
	f.settle()
	after := map[string]stock.SKU{"A": f.snapshot("A"), "NEW": f.snapshot("NEW")}
	if a, b := after["NEW"], before["NEW"]; jsonOf(a) != jsonOf(b) {
		t.Fatalf("duplicates changed NEW:\nbefore %s\nafter  %s", jsonOf(b), jsonOf(a))
	}
	// A: only touch-again applied (one version, one unit into L1).
	if a, b := after["A"], before["A"]; a.Version != b.Version+1 || lotOf(a, "L1").Sellable != lotOf(b, "L1").Sellable+1 {
		t.Fatalf("duplicates changed A: before v%d %+v, after v%d %+v", b.Version, lotOf(b, "L1"), a.Version, lotOf(a, "L1"))
	}
	for id, copies := range f.results {
		for _, c := range copies[1:] {
			if jsonOf(c) != jsonOf(copies[0]) {
				t.Fatalf("%s: a duplicate published another result:\n%s\n%s", id, jsonOf(copies[0]), jsonOf(c))
			}
		}
	}
	all = append(all, f.results["touch-again"][0])

	// The results reach PostgreSQL: the new SKU, the registered lots, the returns.
	if _, err := persist.Apply(ctx, f.db, all); err != nil {
		t.Fatal(err)
	}
	var p2 persist.LotRow
	if err := f.db.Where("sku = ? AND lot_id = ?", "A", "P2").Take(&p2).Error; err != nil {
		t.Fatalf("lot A/P2 not in PostgreSQL: %v", err)
	}
	if p2.RegSeq != 3 || p2.Good || p2.Reserved != 2 || p2.Sellable != 0 {
		t.Fatalf("A/P2 row %+v", p2)
	}
	var sku persist.SKURow
	if err := f.db.Where("sku = ?", "NEW").Take(&sku).Error; err != nil {
		t.Fatalf("sku NEW not in PostgreSQL: %v", err)
	}
	var o2 persist.OrderRow
	if err := f.db.Where("lcid = ?", "o2").Take(&o2).Error; err != nil {
		t.Fatal(err)
	}
	var lines []event.SnapshotLine
	if err := json.Unmarshal(o2.Lines, &lines); err != nil || len(lines) != 1 || jsonOf(lines[0].Returned) != `[{"lot_id":"N1","qty":2}]` {
		t.Fatalf("o2 lines in PostgreSQL %s (%v)", o2.Lines, err)
	}
}

// Warehouse events that can never apply go to the DLQ at decode, each with its reason,
// and move nothing.
func TestInvalidWarehouseEventsGoToTheDLQ(t *testing.T) {
	f := newFleet(t)
	f.seed(boundsInventory("A"))
	f.start(1)
	bodies := map[string]string{
		`{"event_id":"w1","type":"inventory.held","data":{"sku":"A","lot_id":"L1","qty":0,"reason":"x"}}`:                                              domain.ReasonInvalidQuantity,
		`{"event_id":"w2","type":"inventory.damaged","data":{"sku":"A","lot_id":"L1","qty":-3,"reason":"x"}}`:                                          domain.ReasonInvalidQuantity,
		`{"event_id":"w3","type":"inventory.lot_registered","data":{"sku":"A","lot_id":"N","kind":"later","sellable":1}}`:                              domain.ReasonInvalidKind,
		`{"event_id":"w4","type":"inventory.lot_registered","data":{"sku":"A","lot_id":"N","kind":"onhand","sellable":0}}`:                             domain.ReasonInvalidQuantity,
		`{"event_id":"w5","type":"inventory.sku_registered","data":{"sku":"S","safety_stock":-1}}`:                                                     domain.ReasonInvalidQuantity,
		`{"event_id":"w6","type":"order.returned","lcid":"o1","data":{"lines":[{"line_id":"l1","qty":-1}]}}`:                                           domain.ReasonInvalidQuantity,
		`{"event_id":"w7","type":"inventory.lot_recalled","data":{"sku":"A","lot_id":"L1"}}`:                                                           domain.ReasonMissingField,
		`{"event_id":"w8","type":"inventory.held","data":{"sku":"A","lot_id":"L1","qty":1,"reason":"x","extra":1}}`:                                    domain.ReasonMalformedJSON,
		`{"event_id":"w10","type":"inventory.damaged","data":{"sku":"A","lot_id":"L1","qty":1,"reason":"crushed\u0007"}}`:                              domain.ReasonInvalidReason,
		`{"event_id":"w9","type":"inventory.lot_registered","data":{"sku":"A","lot_id":"N","kind":"planned","best_before":"2027-01-01","sellable":1}}`: domain.ReasonInvalidDate,
	}
	var list []string
	for b := range bodies {
		list = append(list, b)
	}
	f.sendRaw(list...)
	reasons, _ := f.deadLettered(len(bodies), time.Minute)
	for b, want := range bodies {
		if got := reasons[b]; len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("%s: DLQ reason %q, want %s", b, got, want)
		}
	}
	if s := f.snapshotIfLoaded("A"); s != nil && lotOf(*s, "L1").Sellable != 10_000 {
		t.Fatalf("invalid events moved stock: %+v", s)
	}
}

func (f *fleet) snapshotIfLoaded(sku string) *stock.SKU {
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := led.Snapshot(context.Background(), sku)
	if err != nil {
		return nil
	}
	return &s
}
