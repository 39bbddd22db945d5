package ledger

import (
	"errors"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
)

// changeSKU: L1 (earliest best-before) has 3 allocated and nothing sellable, so it is no
// candidate until a release puts units back; L2 has 1 sellable.
func changeSKU(ss int64) stock.SKU {
	l1 := lot("L1", stock.KindOnHand, 1, "2027-01-01", 0)
	l1.Allocated = 3
	return stock.SKU{SKU: "A", SafetyStock: ss, Version: 1, Lots: []stock.Lot{l1, lot("L2", stock.KindOnHand, 2, "2027-03-01", 1)}}
}

func lotQty(id string, q int64) []stock.LotQty { return []stock.LotQty{{LotID: id, Qty: q}} }

// A change releases first and then allocates each quantity in turn, in allocation order
// over the state the releases left: L1's released units, which made it a candidate again,
// are taken before L2's (FEFO). One operation, one version.
func TestChangeReleasesThenAllocates(t *testing.T) {
	each(t, []stock.SKU{changeSKU(0)}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.ChangeRequest{OpID: "c", SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip,
			Release: lotQty("L1", 2), Allocate: []int64{1, 2}, Holder: "o1"})
		wantMoves(t, r, err,
			mv{"L1", stock.Allocated, stock.Sellable, 2},
			mv{"L1", stock.Sellable, stock.Allocated, 1},
			mv{"L1", stock.Sellable, stock.Allocated, 1}, mv{"L2", stock.Sellable, stock.Allocated, 1})
		if r.Version != 2 {
			t.Fatalf("version %d, want 2", r.Version)
		}
		snap, _ := inv.Snapshot(ctx, "A")
		if l1, l2 := snap.Lots[0], snap.Lots[1]; l1.Sellable != 0 || l1.Allocated != 3 || l2.Sellable != 0 || l2.Allocated != 1 {
			t.Fatalf("after the change L1 %+v L2 %+v", l1, l2)
		}
		// A replay moves nothing and answers the first result.
		again, err := inv.Apply(ctx, stock.ChangeRequest{OpID: "c", SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip,
			Release: lotQty("L1", 2), Allocate: []int64{1, 2}, Holder: "o1"})
		if err != nil || !again.Replayed || !reflect.DeepEqual(movesOf(again), movesOf(r)) {
			t.Fatalf("replay: %+v %v", again, err)
		}
		// The undo reverses the allocations, then the releases, in one operation.
		u, err := inv.Apply(ctx, stock.UndoRequest{OpID: "c-undo", SKU: "A", From: stock.Sellable, To: stock.Allocated,
			Lots: []stock.LotQty{{LotID: "L1", Qty: 1}, {LotID: "L1", Qty: 1}, {LotID: "L2", Qty: 1}}, Back: lotQty("L1", 2), Holder: "o1"})
		wantMoves(t, u, err,
			mv{"L1", stock.Allocated, stock.Sellable, 1}, mv{"L1", stock.Allocated, stock.Sellable, 1}, mv{"L2", stock.Allocated, stock.Sellable, 1},
			mv{"L1", stock.Sellable, stock.Allocated, 2})
		snap, _ = inv.Snapshot(ctx, "A")
		if l1, l2 := snap.Lots[0], snap.Lots[1]; l1.Sellable != 0 || l1.Allocated != 3 || l2.Sellable != 1 || l2.Allocated != 0 || snap.Version != 3 {
			t.Fatalf("after the undo L1 %+v L2 %+v version %d, want as before at version 3", l1, l2, snap.Version)
		}
	})
}

// A change whose allocations do not fit after its releases, or whose release the bucket
// does not hold, moves nothing: the state and the version stay, and the refusal is
// remembered under the op id.
//
// Broken variant tried: a script that wrote the releases before it walked the
// candidates (and returned the refusal after): the shortage case left L1 with 2 sellable
// at version 2 on Redis, and the model disagreed.
func TestChangeThatDoesNotFitMovesNothing(t *testing.T) {
	cases := []struct {
		name string
		ss   int64
		req  stock.ChangeRequest
		want error
	}{
		{"shortage", 0, stock.ChangeRequest{Mode: stock.ModeShip, Release: lotQty("L1", 2), Allocate: []int64{1, 3}}, stock.ErrShortage},
		{"safety stock", 1, stock.ChangeRequest{Mode: stock.ModeShip, Release: lotQty("L1", 2), Allocate: []int64{3}}, stock.ErrSafetyStock},
		{"release more than held", 0, stock.ChangeRequest{Mode: stock.ModeShip, Release: lotQty("L1", 4), Allocate: []int64{1}}, stock.ErrInsufficient},
		{"release from the other bucket", 0, stock.ChangeRequest{Mode: stock.ModeReserve, Release: lotQty("L1", 1), Allocate: []int64{1}}, stock.ErrInsufficient},
		{"unknown lot", 0, stock.ChangeRequest{Mode: stock.ModeShip, Release: lotQty("LX", 1)}, stock.ErrUnknownLot},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			each(t, []stock.SKU{changeSKU(c.ss)}, func(t *testing.T, inv Inventory) {
				if err := inv.Load(ctx, "A"); err != nil {
					t.Fatal(err)
				}
				before, _ := inv.Snapshot(ctx, "A")
				q := c.req
				q.OpID, q.SKU, q.TargetDate = "c", "A", "2026-12-01"
				r, err := inv.Apply(ctx, q)
				wantErr(t, err, c.want)
				if len(r.Moves) != 0 {
					t.Errorf("moves %+v", r.Moves)
				}
				if after, _ := inv.Snapshot(ctx, "A"); !reflect.DeepEqual(after, before) {
					t.Errorf("state %+v, want as before %+v", after, before)
				}
				if r, err := inv.Apply(ctx, q); !r.Replayed {
					t.Errorf("replay: %+v %v, want the first refusal replayed", r, err)
				} else {
					wantErr(t, err, c.want)
				}
				q.Release, q.Allocate = nil, []int64{1}
				if r, err := inv.Apply(ctx, q); r.Replayed || !errors.Is(err, stock.ErrOpConflict) {
					t.Errorf("other arguments: %+v %v, want ErrOpConflict", r, err)
				}
			})
		})
	}
}

func TestChangeInvalidRequests(t *testing.T) {
	each(t, []stock.SKU{changeSKU(0)}, func(t *testing.T, inv Inventory) {
		ok := stock.ChangeRequest{OpID: "c", SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip, Release: lotQty("L1", 1), Allocate: []int64{1}}
		cases := []struct {
			name string
			edit func(*stock.ChangeRequest)
			want error
		}{
			{"nothing", func(r *stock.ChangeRequest) { r.Release, r.Allocate = nil, nil }, stock.ErrInvalidRequest},
			{"zero allocation", func(r *stock.ChangeRequest) { r.Allocate = []int64{1, 0} }, stock.ErrInvalidQuantity},
			{"huge allocation", func(r *stock.ChangeRequest) { r.Allocate = []int64{stock.MaxQty + 1} }, stock.ErrInvalidQuantity},
			{"zero release", func(r *stock.ChangeRequest) { r.Release = lotQty("L1", 0) }, stock.ErrInvalidQuantity},
			{"bad mode", func(r *stock.ChangeRequest) { r.Mode = "both" }, stock.ErrInvalidRequest},
			{"bad date", func(r *stock.ChangeRequest) { r.TargetDate = "2026-13-01" }, stock.ErrInvalidRequest},
			{"too many allocations", func(r *stock.ChangeRequest) { r.Allocate = make([]int64, 1001) }, stock.ErrInvalidRequest},
			{"no op id", func(r *stock.ChangeRequest) { r.OpID = "" }, stock.ErrInvalidRequest},
		}
		for _, c := range cases {
			q := ok
			c.edit(&q)
			if _, err := inv.Apply(ctx, q); !errors.Is(err, c.want) {
				t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			}
		}
		// Undo's Back goes the other way: only when that is an operation an order makes too.
		_, err := inv.Apply(ctx, stock.UndoRequest{OpID: "u", SKU: "A", From: stock.Allocated, To: stock.Shipped, Lots: lotQty("L1", 1), Back: lotQty("L1", 1)})
		wantErr(t, err, stock.ErrInvalidRequest)
		// None was remembered.
		r, err := inv.Apply(ctx, ok)
		wantMoves(t, r, err, mv{"L1", stock.Allocated, stock.Sellable, 1}, mv{"L1", stock.Sellable, stock.Allocated, 1})
	})
}
