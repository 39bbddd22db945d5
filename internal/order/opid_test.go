package order_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// opPrefix is what the op ids of an order's event begin with: "{<lcid>}<event_id>".
func opPrefix(e event.Order) string { return "{" + e.LCID + "}" + e.EventID }

// opsOf returns the op ids of a result's moves.
func opsOf(r event.Result) map[string]bool {
	ops := map[string]bool{}
	for _, m := range r.Moves {
		ops[m.OpID] = true
	}
	return ops
}

// Two orders' placements that share an event id ("dup-1", as an upstream system that
// reuses event ids sends them), with the same line id and SKU, each allocate their own
// unit: the ledger operations name the order, so the second is not a replay of the
// first. A re-run of the second's step (its commit failed) moves nothing more.
//
// Failed against the code before (op ids "<event_id>:<line>:<step>", no order): both
// results were applied with the same move "dup-1:1:alloc", but P1 had 1 unit allocated.
func TestOrdersSharingAnEventIDEachGetTheirOwnOperations(t *testing.T) {
	t.Parallel()
	s1 := newStepper(t, stock.SKU{SKU: "P", Version: 1, Lots: []stock.Lot{onHand("P1", 1, 10, "2027-01-01")}})
	s2 := &stepper{t: t, led: s1.led, l: s1.l}
	a := placed("LC-P1", stock.ModeShip, line("1", "P", 1))
	b := placed("LC-P2", stock.ModeShip, line("1", "P", 1))
	a.EventID, b.EventID = "dup-1", "dup-1"
	ra := s1.step(a, true)
	before := s2.st
	rb := s2.step(b, true)
	if ra.Outcome != event.Applied || rb.Outcome != event.Applied {
		t.Fatalf("outcomes %s %s, want both applied", ra.Outcome, rb.Outcome)
	}
	if got := s1.lot("P", "P1"); got != [5]int64{8, 0, 2, 0, 0} {
		t.Fatalf("P1 s/r/a/h/x = %v, want 2 allocated (one per order)", got)
	}
	opsA, opsB := opsOf(ra), opsOf(rb)
	if len(opsA) != 1 || len(opsB) != 1 {
		t.Fatalf("ops %v and %v, want one each", opsA, opsB)
	}
	for op := range opsA {
		if opsB[op] {
			t.Errorf("both orders' results carry the move op id %q", op)
		}
	}
	v := s1.version("P")

	// A re-run of LC-P2's step from the state before it: the same answers, nothing moved.
	s2.st = before
	again := s2.step(b, false)
	if !reflect.DeepEqual(again.Moves, rb.Moves) || !reflect.DeepEqual(again.Order, rb.Order) {
		t.Errorf("re-run: %+v %+v, want %+v %+v", again.Moves, again.Order, rb.Moves, rb.Order)
	}
	if got := s1.lot("P", "P1"); got != [5]int64{8, 0, 2, 0, 0} || s1.version("P") != v {
		t.Errorf("after the re-run P1 = %v at version %d, want %v at %d", got, s1.version("P"), [5]int64{8, 0, 2, 0, 0}, v)
	}
}

// older applies, as a worker that did not name the order in its op ids would have, the
// allocation of line 1 (2 units of A1, op id "<event_id>:1:alloc") and, with undo, its undo
// too; then it "crashes": nothing is committed.
func (s *stepper) older(e event.Order, undo bool) {
	s.t.Helper()
	ctx := context.Background()
	op := e.EventID + ":1:alloc"
	if _, err := s.led.Apply(ctx, stock.AllocateRequest{OpID: op, SKU: "A", Qty: 2, TargetDate: "2026-12-01", Mode: stock.ModeReserve, Holder: e.LCID}); err != nil {
		s.t.Fatal(err)
	}
	if !undo {
		return
	}
	if _, err := s.led.Apply(ctx, stock.UndoRequest{OpID: op + "-undo", SKU: "A", From: stock.Sellable, To: stock.Reserved, Lots: lots("A1", 2), Holder: e.LCID}); err != nil {
		s.t.Fatal(err)
	}
}

// A step that an older worker applied in the ledger and did not commit (it crashed in
// between) is re-run by a newer worker, whose op ids name the order: the ledger replays
// the older worker's records, kept under the ids it used, instead of applying the
// operations a second time, and the undo of a replayed operation finds the older undo.
//
// Failed against the new op ids without the legacy lookup (the script ignoring KEYS[3]):
// A1 had 4 units reserved after the placement, and 2 left reserved after the rejected
// one (the older allocation was never undone). Against undos that carry no legacy id: the
// re-run undid line 1 a second time, which the ledger refused (ERR_UNDO_REFUSED).
func TestOlderWorkersOperationsAreReplayedNotAppliedTwice(t *testing.T) {
	t.Parallel()
	t.Run("applied", func(t *testing.T) {
		s := newStepper(t, twoSKUs()...)
		s.t = t
		e := placed("LC-old-1", stock.ModeReserve, line("1", "A", 2))
		s.older(e, false)
		r := s.step(e, true)
		if r.Outcome != event.Applied {
			t.Fatalf("placed: %s %s", r.Outcome, r.Reason)
		}
		if got := s.lot("A", "A1"); got != [5]int64{8, 2, 0, 0, 0} {
			t.Errorf("A1 s/r/a/h/x = %v, want 2 reserved (the older worker's, replayed)", got)
		}
		if len(r.Moves) != 1 || r.Moves[0].Qty != 2 || r.Moves[0].OpID == e.EventID+":1:alloc" {
			t.Errorf("moves %+v, want the one allocation of 2 under the new op id", r.Moves)
		}
	})
	for _, undone := range []bool{false, true} {
		// Line 2 cannot be allocated: the step undoes line 1, which the older worker had
		// allocated (and, with undone, undone too).
		s := newStepper(t, twoSKUs()...)
		s.t = t
		e := placed("LC-old-2", stock.ModeReserve, line("1", "A", 2), line("2", "B", 20))
		s.older(e, undone)
		r := s.step(e, true)
		if r.Outcome != event.Rejected || r.Reason != "ERR_SHORTAGE" {
			t.Fatalf("older worker undid line 1: %v: %s %s (%s), want rejected ERR_SHORTAGE", undone, r.Outcome, r.Reason, r.Detail)
		}
		if got := s.lot("A", "A1"); got != [5]int64{10, 0, 0, 0, 0} {
			t.Errorf("older worker undid line 1: %v: A1 s/r/a/h/x = %v, want all 10 sellable", undone, got)
		}
	}
}
