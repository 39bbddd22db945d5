package api

import (
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/persist"
	"github.com/junban/junban/internal/testenv"
)

// An order's timeline shows its own moves only, also when another order's event had the
// same event id: PostgreSQL keeps both orders' results (entity and event id) and the
// moves query keys on the entity too. Against the moves query keyed on event_id alone,
// LC-P1's timeline listed LC-P2's move on Q.
func TestTimelineMovesAreTheOrdersOwn(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	var rs []event.Result
	for lcid, sku := range map[string]string{"LC-P1": "P", "LC-P2": "Q"} {
		rs = append(rs, event.Result{
			EventID: "dup-1", Entity: lcid, LCID: lcid, Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied,
			ProcessedAt: time.Now(), Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced},
			SKUs: []ledger.SKU{{SKU: sku, Version: 2, Lots: []ledger.Lot{{LotID: sku + "-L1", Kind: ledger.KindOnHand, Good: true,
				ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 9, Allocated: 1}}}},
			Moves: []ledger.Move{{OpID: "dup-1:1:alloc", SKU: sku, LotID: sku + "-L1", From: "sellable", To: "allocated", Qty: 1, Version: 2}},
		})
	}
	rep, err := persist.Apply(ctx, db, rs)
	if err != nil || rep.Count(persist.Applied) != 2 {
		t.Fatalf("apply: %+v, %v", rep, err)
	}
	d := Deps{Redis: rc, Prefix: prefix, DB: db}
	for lcid, sku := range map[string]string{"LC-P1": "P", "LC-P2": "Q"} {
		v, err := d.ReadOrder(ctx, lcid, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Timeline) != 1 {
			t.Fatalf("%s: timeline %+v, want its one event", lcid, v.Timeline)
		}
		ms := v.Timeline[0].Moves
		if len(ms) != 1 || ms[0].SKU != sku {
			t.Errorf("%s: moves of dup-1 %+v, want its one move on %s", lcid, ms, sku)
		}
	}
}
