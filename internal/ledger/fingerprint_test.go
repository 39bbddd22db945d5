package ledger

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// wantConflict checks that err refuses a request under a remembered op id for another
// request: ErrOpConflict, naming the op id, nothing replayed.
func wantConflict(t *testing.T, r stock.Result, err error, opID string) {
	t.Helper()
	if !errors.Is(err, stock.ErrOpConflict) {
		t.Fatalf("error = %v (result %+v), want ErrOpConflict", err, r)
	}
	if !strings.Contains(err.Error(), opID) {
		t.Fatalf("error %q does not name the op id %s", err, opID)
	}
	if r.Replayed || len(r.Moves) != 0 {
		t.Fatalf("a refused request answered %+v", r)
	}
}

// A remembered operation answers a replay only for the same request: any argument that
// decides its effect (quantity, mode, date, holder, the kind itself) differing is refused
// with ErrOpConflict and changes nothing; the same request still gets the first answer, a
// remembered failure included.
//
// Failed against the unchanged script and model (replay by op id alone): the allocation
// of 1 under "o1" answered the allocation of 2 with Replayed set, no error.
func TestReplayOfAnotherRequestIsRefused(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("o1", "A", 2, "2026-12-01", stock.ModeShip)
		a.Holder = "h1"
		first, err := inv.Apply(ctx, a)
		wantMoves(t, first, err, mv{"L", stock.Sellable, stock.Allocated, 2})
		before, _ := inv.Snapshot(ctx, "A")

		again, err := inv.Apply(ctx, a)
		if err != nil || !again.Replayed {
			t.Fatalf("the same request: %+v %v, want the first answer replayed", again, err)
		}
		again.Replayed = false
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("replay differs:\n%+v\n%+v", first, again)
		}

		other := func(f func(*stock.AllocateRequest)) stock.AllocateRequest { b := a; f(&b); return b }
		for name, op := range map[string]stock.Op{
			"qty":     other(func(b *stock.AllocateRequest) { b.Qty = 1 }),
			"mode":    other(func(b *stock.AllocateRequest) { b.Mode = stock.ModeReserve }),
			"date":    other(func(b *stock.AllocateRequest) { b.TargetDate = "2026-12-02" }),
			"holder":  other(func(b *stock.AllocateRequest) { b.Holder = "h2" }),
			"kind":    stock.ConfirmRequest{OpID: "o1", SKU: "A", Lots: lotQty("L", 2), Holder: "h1"},
			"release": stock.ReleaseRequest{OpID: "o1", SKU: "A", From: stock.Allocated, Lots: lotQty("L", 2), Holder: "h1"},
		} {
			r, err := inv.Apply(ctx, op)
			if !errors.Is(err, stock.ErrOpConflict) {
				t.Fatalf("%s differs: %+v %v, want ErrOpConflict", name, r, err)
			}
			wantConflict(t, r, err, "o1")
		}
		if after, _ := inv.Snapshot(ctx, "A"); !reflect.DeepEqual(after, before) {
			t.Fatalf("refused requests changed the SKU:\n%+v\nwant\n%+v", after, before)
		}

		// A remembered failure answers the same request, and refuses another.
		_, err = inv.Apply(ctx, alloc("o2", "A", 9, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage)
		r, err := inv.Apply(ctx, alloc("o2", "A", 1, "2026-12-01", stock.ModeShip))
		wantConflict(t, r, err, "o2")
		r, err = inv.Apply(ctx, alloc("o2", "A", 9, "2026-12-01", stock.ModeShip))
		if !errors.Is(err, stock.ErrShortage) || !r.Replayed {
			t.Fatalf("the failed request again: %+v %v, want its shortage replayed", r, err)
		}
		if after, _ := inv.Snapshot(ctx, "A"); !reflect.DeepEqual(after, before) {
			t.Fatalf("the failure's replays changed the SKU:\n%+v\nwant\n%+v", after, before)
		}
	})
}

// The reproduction on the ledger: an order's change under its op id is undone
// (its quarantine), then the event comes again with other lines, whose change on the SKU
// has the same op id. Replaying the undone record would tell the order it holds 4 units
// that the lot gave back: the lot then sells them a second time. The different request is
// refused instead, and the lot keeps all 10 units sellable and no holder.
//
// Failed against the unchanged script and model: the second change replayed the first's
// 4 moves (Replayed, no error) while L1 had 10 sellable and no holder.
func TestUndoneChangeRefusesAnotherChangeUnderItsOpID(t *testing.T) {
	const op = "{CMP-5}E2:S1:change"
	s := stock.SKU{SKU: "S1", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 10)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		c := stock.ChangeRequest{OpID: op, SKU: "S1", TargetDate: "2026-12-01", Mode: stock.ModeReserve, Allocate: []int64{1, 3}, Holder: "CMP-5"}
		r, err := inv.Apply(ctx, c)
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 1}, mv{"L1", stock.Sellable, stock.Reserved, 3})
		u, err := inv.Apply(ctx, stock.UndoRequest{OpID: op + "-undo", SKU: "S1", From: stock.Sellable, To: stock.Reserved,
			Lots: []stock.LotQty{{LotID: "L1", Qty: 1}, {LotID: "L1", Qty: 3}}, Holder: "CMP-5"})
		wantMoves(t, u, err, mv{"L1", stock.Reserved, stock.Sellable, 1}, mv{"L1", stock.Reserved, stock.Sellable, 3})
		before, _ := inv.Snapshot(ctx, "S1")

		c2 := c
		c2.Allocate = []int64{1}
		r, err = inv.Apply(ctx, c2)
		wantConflict(t, r, err, op)
		after, _ := inv.Snapshot(ctx, "S1")
		if !reflect.DeepEqual(after, before) || after.Lots[0].Sellable != 10 {
			t.Fatalf("after the refused change %+v, want as before with 10 sellable: %+v", after, before)
		}
		if m, ok := inv.(*stock.Model); ok && len(m.Holders("S1", "L1")) != 0 {
			t.Fatalf("holders after the refused change: %+v", m.Holders("S1", "L1"))
		}
		// The undo's own record refuses another undo under its id too.
		r, err = inv.Apply(ctx, stock.UndoRequest{OpID: op + "-undo", SKU: "S1", From: stock.Sellable, To: stock.Reserved,
			Lots: []stock.LotQty{{LotID: "L1", Qty: 1}}, Holder: "CMP-5"})
		wantConflict(t, r, err, op+"-undo")
	})
}

// A legacy op id is an alias an older worker may have written the operation's record
// under. A record there that answers another request (one this version wrote: it carries
// a fingerprint, so no older worker wrote it) is no record of this operation: it is not
// replayed, and the operation applies under its own op id.
//
// Failed against the unchanged script and model: the allocation replayed the adjustment
// "e1:L:adjust" (a move from external) and allocated nothing.
func TestLegacyOpIDOfAnotherRequestIsNotReplayed(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		if _, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "e1:L:adjust", SKU: "A", LotID: "L", Delta: 1, Reason: "count"}); err != nil {
			t.Fatal(err)
		}
		a := alloc("{o1}e1:L:alloc", "A", 2, "2026-12-01", stock.ModeShip)
		a.LegacyOpID = "e1:L:adjust"
		r, err := inv.Apply(ctx, a)
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 2})
		if r.Replayed || r.Version != 2 {
			t.Fatalf("%+v, want applied at version 2", r)
		}
		// Its own record answers it from now on.
		r, err = inv.Apply(ctx, a)
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 2})
		if !r.Replayed || r.Version != 2 {
			t.Fatalf("again: %+v, want its own answer replayed", r)
		}
	})
}

// Records written before fingerprints have none: their op ids were written by the
// version before, which compared nothing, so a replay under such an id is answered from
// the record as that version did, whatever the request (the order-worker re-running a
// step after an upgrade sends the same request). Under the op id and under a legacy id.
//
// Failed against a script that refused records without a fingerprint: ErrOpConflict for
// the upgraded worker's re-run.
func TestRecordsWithoutFingerprintAreReplayed(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	stripped := func(opID string) {
		t.Helper()
		k := opKey(prefix, "A", opID)
		rec, err := rc.Get(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(rec) < 1+stock.FingerprintBytes || rec[0] != '#' {
			t.Fatalf("record %q carries no fingerprint", rec)
		}
		if err := rc.Set(ctx, k, rec[1+stock.FingerprintBytes:], 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first, err := l.Apply(ctx, alloc("old", "A", 2, "2026-12-01", stock.ModeShip))
	wantMoves(t, first, err, mv{"L", stock.Sellable, stock.Allocated, 2})
	stripped("old")
	r, err := l.Apply(ctx, alloc("old", "A", 1, "2026-12-01", stock.ModeReserve))
	if err != nil || !r.Replayed || !reflect.DeepEqual(movesOf(r), movesOf(first)) {
		t.Fatalf("a record without fingerprint: %+v %v, want its answer replayed", r, err)
	}
	_, err = l.Apply(ctx, alloc("old-fail", "A", 9, "2026-12-01", stock.ModeShip))
	wantErr(t, err, stock.ErrShortage)
	stripped("old-fail")
	if r, err := l.Apply(ctx, alloc("old-fail", "A", 1, "2026-12-01", stock.ModeShip)); !errors.Is(err, stock.ErrShortage) || !r.Replayed {
		t.Fatalf("a failure without fingerprint: %+v %v, want its shortage replayed", r, err)
	}
	a := alloc("new", "A", 1, "2026-12-01", stock.ModeShip)
	a.LegacyOpID = "old"
	r, err = l.Apply(ctx, a)
	if err != nil || !r.Replayed || r.Version != first.Version {
		t.Fatalf("a legacy record without fingerprint: %+v %v, want it replayed", r, err)
	}
	if snap, _ := l.Snapshot(ctx, "A"); snap.Version != 1 || snap.Lots[0].Sellable != 3 {
		t.Fatalf("the replays moved stock: %+v", snap)
	}
}
