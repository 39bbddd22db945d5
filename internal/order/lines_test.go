package order_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// skuVersion returns sku's version in led: one more for each operation that moved its
// stock.
func skuVersion(t *testing.T, led *ledger.Ledger, sku string) int64 {
	t.Helper()
	snap, err := led.Snapshot(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version
}

// version returns a SKU's version in the ledger.
func (s *stepper) version(sku string) int64 {
	s.t.Helper()
	return skuVersion(s.t, s.led, sku)
}

// wantLines fails unless the order's lines are exactly these (line id, qty, lots).
func wantLines(t *testing.T, o *event.OrderSnapshot, want ...event.SnapshotLine) {
	t.Helper()
	var have []event.SnapshotLine
	for _, ln := range o.Lines {
		have = append(have, event.SnapshotLine{LineID: ln.LineID, SKU: ln.SKU, Qty: ln.Qty, Lots: ln.Lots})
	}
	if !reflect.DeepEqual(have, want) {
		t.Fatalf("order lines %+v, want %+v", have, want)
	}
}

func lots(id string, qty int64) []stock.LotQty { return []stock.LotQty{{LotID: id, Qty: qty}} }

// An order holds line 1 = 3 and line 2 = 3 of a SKU with no spare unit; a change to
// line 1 = 1 and line 2 = 5 fits once line 1's two units are released, and it applies:
// the SKU's lines change in one ledger operation that releases first, then allocates.
// The SKU's allocated stays 6, a re-run of the step (its commit failed) gets the same
// answers and moves nothing more, and a cancellation then releases exactly the 6.
//
// Failed against the code before (the raise allocated first, then the releases): the
// change was rejected with ERR_SHORTAGE.
func TestLinesChangedReleasesBeforeItAllocates(t *testing.T) {
	t.Parallel()
	s := newStepper(t, stock.SKU{SKU: "S", Version: 1, Lots: []stock.Lot{onHand("S1", 1, 6, "2027-01-01")}})
	if r := s.step(placed("L-net", stock.ModeShip, line("1", "S", 3), line("2", "S", 3)), true); r.Outcome != event.Applied {
		t.Fatalf("placed: %s %s", r.Outcome, r.Reason)
	}
	if got := s.lot("S", "S1"); got != [5]int64{0, 0, 6, 0, 0} {
		t.Fatalf("after the placement S1 s/r/a/h/x = %v, want all 6 allocated", got)
	}
	before := s.st
	change := ev("L-net", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "S", 1), line("2", "S", 5)}})
	r := s.step(change, true)
	if r.Outcome != event.Applied {
		t.Fatalf("change: %s %s (%s), want applied", r.Outcome, r.Reason, r.Detail)
	}
	wantLines(t, r.Order,
		event.SnapshotLine{LineID: "1", SKU: "S", Qty: 1, Lots: lots("S1", 1)},
		event.SnapshotLine{LineID: "2", SKU: "S", Qty: 5, Lots: lots("S1", 5)})
	if got := s.lot("S", "S1"); got != [5]int64{0, 0, 6, 0, 0} {
		t.Errorf("after the change S1 s/r/a/h/x = %v, want 6 allocated still", got)
	}
	ops := map[string]bool{}
	for _, m := range r.Moves {
		ops[m.OpID] = true
	}
	if len(ops) != 1 || !ops[opPrefix(change)+":S:change"] {
		t.Errorf("ops %v, want the SKU's one change operation", ops)
	}
	v := s.version("S")

	// A re-run from the state before the change: the same answers, nothing moved again.
	next := s.st
	s.st = before
	if again := s.step(change, false); !reflect.DeepEqual(again.Moves, r.Moves) || !reflect.DeepEqual(again.Order, r.Order) {
		t.Errorf("re-run: %+v %+v, want %+v %+v", again.Moves, again.Order, r.Moves, r.Order)
	}
	if got, vv := s.lot("S", "S1"), s.version("S"); got != [5]int64{0, 0, 6, 0, 0} || vv != v {
		t.Errorf("after the re-run S1 = %v at version %d, want 6 allocated at version %d", got, vv, v)
	}
	s.st = next

	if r := s.step(ev("L-net", event.OrderCancelled, nil), true); r.Outcome != event.Applied {
		t.Fatalf("cancel: %s %s", r.Outcome, r.Reason)
	}
	if got := s.lot("S", "S1"); got != [5]int64{6, 0, 0, 0, 0} {
		t.Errorf("after the cancel S1 = %v, want all 6 sellable", got)
	}
}

// A change whose raise does not fit even after the SKU's releases is refused as a whole:
// nothing moves (no release and its undo either), the SKU's version stays, the order stays
// as it was, and the result says why.
//
// Broken variant tried: the SKU's releases and its allocation sent as two operations
// (a release, then an allocation): the refusal left the release and its undo in the
// result, and the SKU's version moved on by two.
func TestLinesChangedThatDoesNotFitMovesNothing(t *testing.T) {
	t.Parallel()
	s := newStepper(t, stock.SKU{SKU: "S", Version: 1, Lots: []stock.Lot{onHand("S1", 1, 7, "2027-01-01")}})
	if r := s.step(placed("L-nofit", stock.ModeShip, line("1", "S", 3), line("2", "S", 3)), true); r.Outcome != event.Applied {
		t.Fatalf("placed: %s %s", r.Outcome, r.Reason)
	}
	before, v := s.st, s.version("S")
	// 1 spare + 2 released = 3, and line 2 asks 4 more.
	r := s.step(ev("L-nofit", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "S", 1), line("2", "S", 7)}}), true)
	if r.Outcome != event.Rejected || r.Reason != "ERR_SHORTAGE" {
		t.Fatalf("%s %s, want rejected ERR_SHORTAGE", r.Outcome, r.Reason)
	}
	if !strings.Contains(r.Detail, "requested=4 available=3") {
		t.Errorf("detail %q, want the refusal of 4 with 3 available", r.Detail)
	}
	if len(r.Moves) != 0 {
		t.Errorf("moves %+v, want none", r.Moves)
	}
	if got, vv := s.lot("S", "S1"), s.version("S"); got != [5]int64{1, 0, 6, 0, 0} || vv != v {
		t.Errorf("S1 = %v at version %d, want as before: %v at version %d", got, vv, [5]int64{1, 0, 6, 0, 0}, v)
	}
	if !reflect.DeepEqual(r.Order, before.Order) {
		t.Errorf("the order changed: %+v, want %+v", r.Order, before.Order)
	}
}

// A change on two SKUs is all or nothing: SKU A's lines change (one operation), SKU B's
// raise is refused, and A's operation is moved back, releases and allocations alike, by
// one undo. The order stays as it was, and a re-run gets the same answers. Another order
// that asks for A between A's change and its undo finds no spare unit: it may see A's
// units moved between lines, never more than A holds.
//
// Failed against the code before: A's raise was refused first (ERR_SHORTAGE) and
// nothing of A's change happened. Broken variant tried: the rollback of the code before,
// which undoes one pair of buckets per operation: Step failed ("moves between several
// buckets") on A's change.
func TestLinesChangedRefusedOnTheSecondSKUUndoesTheFirst(t *testing.T) {
	t.Parallel()
	s := newStepper(t,
		stock.SKU{SKU: "A", Version: 1, Lots: []stock.Lot{onHand("A1", 1, 6, "2027-01-01")}},
		stock.SKU{SKU: "B", Version: 1, Lots: []stock.Lot{onHand("B1", 1, 2, "2027-01-01")}})
	if r := s.step(placed("L-two", stock.ModeShip, line("1", "A", 3), line("2", "A", 3), line("3", "B", 2)), true); r.Outcome != event.Applied {
		t.Fatalf("placed: %s %s", r.Outcome, r.Reason)
	}
	before := s.st
	change := ev("L-two", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "A", 1), line("2", "A", 5), line("3", "B", 3)}})
	var other error
	s.l.after[opPrefix(change)+":A:change"] = func() {
		_, other = s.led.Apply(context.Background(), stock.AllocateRequest{
			OpID: "other:alloc", SKU: "A", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeReserve,
		})
	}
	r := s.step(change, false)
	if r.Outcome != event.Rejected || r.Reason != "ERR_SHORTAGE" {
		t.Fatalf("%s %s (%s), want rejected ERR_SHORTAGE", r.Outcome, r.Reason, r.Detail)
	}
	if !errors.Is(other, stock.ErrShortage) {
		t.Errorf("the other order's allocation between A's change and its undo: %v, want ERR_SHORTAGE", other)
	}
	if !hasOp(r, opPrefix(change)+":A:change") || !hasOp(r, opPrefix(change)+":A:change-undo") {
		t.Errorf("moves %+v, want A's change and its undo", r.Moves)
	}
	if got := s.lot("A", "A1"); got != [5]int64{0, 0, 6, 0, 0} {
		t.Errorf("A1 s/r/a/h/x = %v, want as before (6 allocated)", got)
	}
	if got := s.lot("B", "B1"); got != [5]int64{0, 0, 2, 0, 0} {
		t.Errorf("B1 s/r/a/h/x = %v, want as before (2 allocated)", got)
	}
	if !reflect.DeepEqual(r.Order, before.Order) {
		t.Errorf("the order changed: %+v, want %+v", r.Order, before.Order)
	}
	delete(s.l.after, opPrefix(change)+":A:change")
	if again := s.step(change, false); !reflect.DeepEqual(again.Moves, r.Moves) || again.Reason != r.Reason {
		t.Errorf("re-run: %s %+v, want %s %+v", again.Reason, again.Moves, r.Reason, r.Moves)
	}
	if got := s.lot("A", "A1"); got != [5]int64{0, 0, 6, 0, 0} {
		t.Errorf("after the re-run A1 = %v, want 6 allocated", got)
	}
	// The order still holds what it held: a cancellation releases it all.
	if r := s.step(ev("L-two", event.OrderCancelled, nil), true); r.Outcome != event.Applied {
		t.Fatalf("cancel: %s %s", r.Outcome, r.Reason)
	}
	if a, b := s.lot("A", "A1"), s.lot("B", "B1"); a != [5]int64{6, 0, 0, 0, 0} || b != [5]int64{2, 0, 0, 0, 0} {
		t.Errorf("after the cancel A1 = %v, B1 = %v, want all sellable", a, b)
	}
}
