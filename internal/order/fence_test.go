package order_test

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// An order's line goes 2 -> 3 (event X), then 3 -> 2 (event Y); X is then delivered again
// once its done marker is gone (JUNBAN_DONE_RETENTION shorter than the op retention, or a
// sender's late resend). Its change on the SKU is the very request it made the first time
// (from 2 to 3: allocate 1), so its op id's record matches its fingerprint; but the order
// has moved on since, and the old answer is not this step's: the ledger refuses it
// (ERR_OP_FENCED), the event is rejected, and the order and the ledger still agree.
//
// Failed against the ledger before fences (records kept the fingerprint alone): X's
// second run was applied from the replayed answer, the order holding 3 units while the
// ledger reserved 2 for it.
func TestOldOperationIsNotReplayedForAMovedOnOrder(t *testing.T) {
	t.Parallel()
	s := newStepper(t, stock.SKU{SKU: "S", Version: 1, Lots: []stock.Lot{onHand("S1", 1, 10, "2027-01-01")}})
	const lcid = "L-fence"
	if r := s.step(placed(lcid, stock.ModeReserve, line("1", "S", 2)), true); r.Outcome != event.Applied {
		t.Fatalf("placed: %s %s", r.Outcome, r.Reason)
	}
	x := ev(lcid, event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "S", 3)}})
	if r := s.step(x, true); r.Outcome != event.Applied {
		t.Fatalf("X: %s %s (%s)", r.Outcome, r.Reason, r.Detail)
	}
	y := ev(lcid, event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "S", 2)}})
	if r := s.step(y, true); r.Outcome != event.Applied {
		t.Fatalf("Y: %s %s (%s)", r.Outcome, r.Reason, r.Detail)
	}
	v := s.version("S")

	r := s.step(x, true)
	if r.Outcome != event.Rejected || r.Reason != "ERR_OP_FENCED" || !strings.Contains(r.Detail, opPrefix(x)+":S:change") {
		t.Errorf("X again: %s %s (%s), want rejected with ERR_OP_FENCED naming its op id", r.Outcome, r.Reason, r.Detail)
	}
	if len(r.Moves) != 0 {
		t.Errorf("X again moved %+v", r.Moves)
	}
	if got := s.lot("S", "S1"); got != [5]int64{8, 2, 0, 0, 0} || s.version("S") != v {
		t.Errorf("S1 s/r/a/h/x = %v at version %d, want 2 reserved at version %d", got, s.version("S"), v)
	}
	var held int64
	for _, ln := range s.st.Order.Lines {
		held += ln.Qty
	}
	if held != 2 {
		t.Errorf("the order holds %d units, the ledger reserved 2 for it", held)
	}
}
