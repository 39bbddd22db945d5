package domain_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// A SKU's event that fills the queue says, in its result's SKU entry, each waiting line
// its operation changed as it left it: persistence keeps the queue from these. B's 3
// units go to the first line, which waits for 4 more and a second line for 2; an
// adjustment of 5 fills the first (want 0: it left the queue) and gives the second 1.
func TestResultCarriesTheQueueEntriesItChanged(t *testing.T) {
	ctx := context.Background()
	m := stock.NewModel(unknownSKUs{})
	for _, s := range stockSKUs() {
		if _, err := m.Put(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []stock.BackorderRequest{
		{OpID: "b1", SKU: "B", Holder: "LC-9", Line: "1", Qty: 7, TargetDate: "2026-12-01", Mode: reserve, QueuedAt: 1},
		{OpID: "b2", SKU: "B", Holder: "LC-8", Line: "2", Qty: 2, TargetDate: "2026-12-01", Mode: reserve, QueuedAt: 2},
	} {
		if _, err := m.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	_, results, err := domain.Step(ctx, m, domain.Policy{}, domain.State{}, decode(t, adjust("B", "B1", 5), "adj"), arrival, now)
	if err != nil || len(results) != 1 || results[0].Outcome != applied {
		t.Fatalf("step: %+v %v", results, err)
	}
	want := []event.QueueEntry{
		{Holder: "LC-9", Line: "1", Want: 0, Mode: reserve, TargetDate: "2026-12-01", Seq: 1, QueuedAt: 1},
		{Holder: "LC-8", Line: "2", Want: 1, Mode: reserve, TargetDate: "2026-12-01", Seq: 2, QueuedAt: 2},
	}
	var got []event.QueueEntry
	for _, s := range results[0].SKUs {
		got = append(got, s.Queue...)
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("queue entries in the result %+v, want %+v", got, want)
	}
}
