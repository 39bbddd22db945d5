package domain_test

import (
	"context"
	"strings"
	"testing"

	"github.com/junban/junban/internal/domain"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// An event whose ledger operation finds its op id remembered for another request is
// rejected with ERR_OP_CONFLICT, its earlier lines undone, instead of taking the other
// request's answer for its own: here line 2's allocation of 2 units of B under
// "{O1}ev:2:alloc", which holds an allocation of 1 unit.
//
// Failed against the unchanged ledger (replay by op id alone): the placement applied,
// line 2 holding B1's 2 units by the replayed answer of 1 unit.
func TestAnotherRequestUnderAnEventsOpIDRejectsIt(t *testing.T) {
	const op = "{" + lcid + "}ev:2:alloc"
	tamper := stock.AllocateRequest{OpID: op, SKU: "B", Qty: 1, TargetDate: "2026-12-03", Mode: reserve}
	ev := place(reserve, line("1", "A", 2), line("2", "B", 2))
	runTransition(t, transitionCase{
		name:   "ERR_OP_CONFLICT",
		tamper: tamper,
		ev:     ev,
		want: expect{outcome: rejected, reason: "ERR_OP_CONFLICT", order: "rejected/-/unpaid",
			lines: []event.SnapshotLine{snap("1", "A", 2), snap("2", "B", 2)}, moves: ops(":1:alloc", ":1:alloc-undo")},
	})

	// The result's detail names the op id, for the operator.
	m := stock.NewModel(unknownSKUs{})
	for _, s := range stockSKUs() {
		if _, err := m.Put(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Apply(context.Background(), tamper); err != nil {
		t.Fatal(err)
	}
	_, results, err := domain.Step(context.Background(), m, domain.Policy{}, domain.State{}, decode(t, ev, "ev"), arrival, now)
	if err != nil || len(results) != 1 {
		t.Fatalf("step: %v results, error %v", len(results), err)
	}
	if r := results[0]; r.Reason != "ERR_OP_CONFLICT" || !strings.Contains(r.Detail, "op_id="+op) {
		t.Fatalf("result %s %q, want ERR_OP_CONFLICT naming %s", r.Reason, r.Detail, op)
	}
}
