package ledger

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
)

// A move gives back the lots it names and allocates their sum, in the same bucket, at
// its destination alone: FEFO on hand, then LIFO planned there, over the state the
// releases left; a destination that cannot cover it moves nothing and the refusal names
// it. Script and model alike.
func TestMoveAllocationTakesAtTheDestinationOnly(t *testing.T) {
	at := func(l stock.Lot, loc string) stock.Lot { l.Location = loc; return l }
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("old", stock.KindOnHand, 0, "2027-01-01", 5),
		at(lot("s1", stock.KindOnHand, 1, "2027-02-01", 5), "store-1"),
		at(lot("p1", stock.KindPlanned, 2, "", 2), "store-1"),
		at(lot("p2", stock.KindPlanned, 3, "", 2), "store-1"),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.AllocateRequest{OpID: "a1", SKU: "A", Qty: 3, TargetDate: "2026-12-01", Mode: stock.ModeShip, Holder: "O1"})
		wantMoves(t, r, err, mv{"old", stock.Sellable, stock.Allocated, 3})
		move := func(op string, mode stock.Mode, lots []stock.LotQty, holder string) (stock.Result, error) {
			return inv.Apply(ctx, stock.MoveAllocationRequest{OpID: op, SKU: "A", TargetDate: "2026-12-01", Mode: mode, Release: lots, To: "store-1", Holder: holder})
		}
		r, err = move("m1", stock.ModeShip, lotQty("old", 3), "O1")
		wantMoves(t, r, err, mv{"old", stock.Allocated, stock.Sellable, 3}, mv{"s1", stock.Sellable, stock.Allocated, 3})
		for _, l := range r.Lots {
			if want := map[string]string{"old": "", "s1": "store-1"}[l.LotID]; l.Location != want {
				t.Fatalf("lot %s at %q, want %q", l.LotID, l.Location, want)
			}
		}
		// Reserved stays reserved: s1's last 2, then the newest planned lot.
		r, err = inv.Apply(ctx, stock.AllocateRequest{OpID: "a2", SKU: "A", Qty: 4, TargetDate: "2026-12-01", Mode: stock.ModeReserve, Holder: "O2"})
		wantMoves(t, r, err, mv{"old", stock.Sellable, stock.Reserved, 4})
		r, err = move("m2", stock.ModeReserve, lotQty("old", 4), "O2")
		wantMoves(t, r, err, mv{"old", stock.Reserved, stock.Sellable, 4}, mv{"s1", stock.Sellable, stock.Reserved, 2}, mv{"p2", stock.Sellable, stock.Reserved, 2})
		// store-1 has 2 left (p1): 3 do not fit, and nothing is released.
		r, err = inv.Apply(ctx, stock.AllocateRequest{OpID: "a3", SKU: "A", Qty: 3, TargetDate: "2026-12-01", Mode: stock.ModeShip, Holder: "O3"})
		wantMoves(t, r, err, mv{"old", stock.Sellable, stock.Allocated, 3})
		_, err = move("m3", stock.ModeShip, lotQty("old", 3), "O3")
		wantErr(t, err, stock.ErrShortage)
		if !strings.Contains(err.Error(), "requested=3 available=2 location=store-1") {
			t.Fatalf("refusal %v does not name the location", err)
		}
		snap, err := inv.Snapshot(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range snap.Lots {
			if l.LotID == "old" && (l.Allocated != 3 || l.Sellable != 2) {
				t.Fatalf("a refused move moved lot old: %+v", l)
			}
		}
	})
}
