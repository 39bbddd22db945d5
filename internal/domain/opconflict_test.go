package domain_test

import (
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
)

// An event whose ledger operation finds its op id remembered for another request is
// rejected with ERR_OP_CONFLICT, its earlier lines undone, instead of taking the other
// request's answer for its own: here line 2's allocation of 2 units of B under
// "{O1}ev:2:alloc", which holds an allocation of 1 unit.
//
// Failed against the unchanged ledger (replay by op id alone): the placement applied,
// line 2 holding B1's 2 units by the replayed answer of 1 unit.
func TestAnotherRequestUnderAnEventsOpIDRejectsIt(t *testing.T) {
	runTransition(t, transitionCase{
		name:   "ERR_OP_CONFLICT",
		tamper: ledger.AllocateRequest{OpID: "{" + lcid + "}ev:2:alloc", SKU: "B", Qty: 1, TargetDate: "2026-12-03", Mode: reserve},
		ev:     place(reserve, line("1", "A", 2), line("2", "B", 2)),
		want: expect{outcome: rejected, reason: "ERR_OP_CONFLICT", order: "rejected/-/unpaid",
			lines: []event.SnapshotLine{snap("1", "A", 2), snap("2", "B", 2)}, moves: ops(":1:alloc", ":1:alloc-undo")},
	})
}
