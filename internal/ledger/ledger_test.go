package ledger

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// memLoader serves SKUs from memory and counts calls.
type memLoader struct {
	mu    sync.Mutex
	skus  map[string]stock.SKU
	calls int
}

func newMemLoader(skus ...stock.SKU) *memLoader {
	m := &memLoader{skus: map[string]stock.SKU{}}
	for _, s := range skus {
		m.skus[s.SKU] = s
	}
	return m
}

func (m *memLoader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	s, ok := m.skus[sku]
	if !ok {
		return stock.SKU{}, stock.ErrUnknownSKU
	}
	return cloneSKU(s), nil
}

// impls returns a Ledger on real Redis and a Model over the same SKUs, so every rule is
// checked on both.
func impls(t *testing.T, skus ...stock.SKU) map[string]Inventory {
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(skus...)})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Inventory{
		"redis": l,
		"model": stock.NewModel(newMemLoader(skus...)),
	}
}

func lot(id, kind string, reg int64, bb string, sellable int64) stock.Lot {
	return stock.Lot{LotID: id, Kind: kind, Good: true, BestBefore: bb, RegSeq: reg,
		ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: sellable}
}

var ctx = context.Background()

type mv struct {
	lot, from, to string
	qty           int64
}

func movesOf(r stock.Result) []mv {
	out := []mv{}
	for i, m := range r.Moves {
		if m.Index != i || m.OpID != r.OpID || m.SKU != r.SKU {
			panic(fmt.Sprintf("bad move header %+v in %+v", m, r))
		}
		out = append(out, mv{m.LotID, m.From, m.To, m.Qty})
	}
	return out
}

func wantMoves(t *testing.T, r stock.Result, err error, want ...mv) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error %v", err)
	}
	if got := movesOf(r); !reflect.DeepEqual(got, append([]mv{}, want...)) {
		t.Fatalf("moves = %v, want %v", got, want)
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

func each(t *testing.T, skus []stock.SKU, fn func(t *testing.T, inv Inventory)) {
	for name, inv := range impls(t, skus...) {
		t.Run(name, func(t *testing.T) { fn(t, inv) })
	}
}

func alloc(op, sku string, qty int64, date string, mode stock.Mode) stock.AllocateRequest {
	return stock.AllocateRequest{OpID: op, SKU: sku, Qty: qty, TargetDate: date, Mode: mode}
}

func TestFEFO(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("late", stock.KindOnHand, 1, "2027-03-01", 2),
		lot("early-2", stock.KindOnHand, 3, "2027-01-01", 2),
		lot("early-1", stock.KindOnHand, 2, "2027-01-01", 2),
		lot("nobb", stock.KindOnHand, 0, "", 2),
		lot("planned", stock.KindPlanned, 9, "", 2),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("o1", "A", 7, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"early-1", stock.Sellable, stock.Allocated, 2}, mv{"early-2", stock.Sellable, stock.Allocated, 2},
			mv{"late", stock.Sellable, stock.Allocated, 2}, mv{"nobb", stock.Sellable, stock.Allocated, 1})
		if r.Version != 1 || len(r.Lots) != 4 || r.Lots[3].LotID != "nobb" || r.Lots[3].Sellable != 1 || r.Lots[3].Allocated != 1 {
			t.Fatalf("result %+v", r)
		}
	})
}

func TestPlannedLIFOAfterOnHand(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("p-old", stock.KindPlanned, 1, "", 5),
		lot("onhand", stock.KindOnHand, 2, "2027-01-01", 1),
		lot("p-new", stock.KindPlanned, 3, "", 5),
		lot("p-mid", stock.KindPlanned, 2_000, "2026-01-01", 5),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("o1", "A", 9, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"onhand", stock.Sellable, stock.Reserved, 1}, mv{"p-mid", stock.Sellable, stock.Reserved, 5},
			mv{"p-new", stock.Sellable, stock.Reserved, 3})
	})
}

func TestPeriodBothEdgesInclusive(t *testing.T) {
	l := lot("L", stock.KindOnHand, 1, "2027-01-01", 10)
	l.ValidFrom, l.ValidTo = "2026-12-01", "2026-12-10"
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{l}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		_, err := inv.Apply(ctx, alloc("before", "A", 1, "2026-11-30", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage)
		r, err := inv.Apply(ctx, alloc("first", "A", 1, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		r, err = inv.Apply(ctx, alloc("last", "A", 1, "2026-12-10", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		_, err = inv.Apply(ctx, alloc("after", "A", 1, "2026-12-11", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage)
	})
}

func TestDefectiveNeverAllocated(t *testing.T) {
	bad := lot("bad", stock.KindOnHand, 1, "2026-01-01", 100)
	bad.Good = false
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{bad, lot("ok", stock.KindOnHand, 2, "2027-01-01", 3), lot("p", stock.KindPlanned, 3, "", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		_, err := inv.Apply(ctx, alloc("o1", "A", 7, "2026-12-01", stock.ModeReserve))
		wantErr(t, err, stock.ErrShortage)
		r, err := inv.Apply(ctx, stock.RecallRequest{OpID: "d1", SKU: "A", LotID: "ok", Reason: "supplier recall"})
		wantMoves(t, r, err, mv{"ok", stock.Sellable, stock.Defective, 3})
		if r.Lots[0].Good || r.Version != 1 {
			t.Fatalf("after Recall: %+v", r)
		}
		r, err = inv.Apply(ctx, alloc("o2", "A", 2, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"p", stock.Sellable, stock.Reserved, 2})
	})
}

func TestSafetyStockOnlyForShip(t *testing.T) {
	s := stock.SKU{SKU: "A", SafetyStock: 5, Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 10)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		_, err := inv.Apply(ctx, alloc("s11", "A", 11, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage) // short in either mode: shortage, not safety stock
		_, err = inv.Apply(ctx, alloc("s6", "A", 6, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrSafetyStock)
		r, err := inv.Apply(ctx, alloc("r6", "A", 6, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Reserved, 6})
		_, err = inv.Apply(ctx, alloc("s1", "A", 1, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrSafetyStock)
		// Confirm has no safety check: the stock is already set aside.
		r, err = inv.Apply(ctx, stock.ConfirmRequest{OpID: "c", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 6}}})
		wantMoves(t, r, err, mv{"L", stock.Reserved, stock.Allocated, 6})
		_, err = inv.Apply(ctx, alloc("r4", "A", 4, "2026-12-01", stock.ModeReserve)) // reserve may dip into safety stock
		if err != nil {
			t.Fatal(err)
		}
	})
	s2 := stock.SKU{SKU: "B", SafetyStock: 5, Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 10)}}
	each(t, []stock.SKU{s2}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("s5", "B", 5, "2026-12-01", stock.ModeShip)) // S = ss + qty exactly
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 5})
	})
}

func TestShortageMovesNothing(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 3), lot("L2", stock.KindPlanned, 2, "", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		if err := inv.Load(ctx, "A"); err != nil {
			t.Fatal(err)
		}
		before, _ := inv.Snapshot(ctx, "A")
		r, err := inv.Apply(ctx, alloc("o1", "A", 7, "2026-12-01", stock.ModeReserve))
		wantErr(t, err, stock.ErrShortage)
		if stock.Reason(err) != "ERR_SHORTAGE" || len(r.Moves) != 0 || r.Version != 0 {
			t.Fatalf("result %+v err %v", r, err)
		}
		after, _ := inv.Snapshot(ctx, "A")
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("state changed:\n%+v\n%+v", before, after)
		}
	})
}

func TestReplayReturnsFirstResultAndMovesNothing(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		first, err := inv.Apply(ctx, alloc("o1", "A", 2, "2026-12-01", stock.ModeShip))
		wantMoves(t, first, err, mv{"L", stock.Sellable, stock.Allocated, 2})
		// The same request under the op id gets the first answer (another request is
		// refused: TestReplayOfAnotherRequestIsRefused).
		again, err := inv.Apply(ctx, alloc("o1", "A", 2, "2026-12-01", stock.ModeShip))
		if err != nil || !again.Replayed {
			t.Fatalf("replay: %+v %v", again, err)
		}
		again.Replayed = false
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("replay differs:\n%+v\n%+v", first, again)
		}
		snap, _ := inv.Snapshot(ctx, "A")
		if snap.Version != 1 || snap.Lots[0].Sellable != 1 {
			t.Fatalf("replay moved stock: %+v", snap)
		}
		// A failure is remembered too: the same op id fails the same way after stock arrives.
		_, err = inv.Apply(ctx, alloc("o2", "A", 5, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage)
		if _, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "adj", SKU: "A", LotID: "L", Delta: 10, Reason: "count"}); err != nil {
			t.Fatal(err)
		}
		r, err := inv.Apply(ctx, alloc("o2", "A", 5, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrShortage)
		if !r.Replayed {
			t.Fatalf("failed replay not flagged: %+v", r)
		}
		r, err = inv.Apply(ctx, alloc("o3", "A", 5, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 5})
	})
}

// An operation's legacy op id is only looked up: when its own op id has a record, that
// answers; when only the legacy id has one (an older caller applied the operation under
// it), that is replayed, in the new op id's name, and moves nothing; when neither has one,
// the operation applies and is remembered under its own op id alone.
//
// Failed against the script ignoring KEYS[3]: "new-1" allocated a second time (L's
// sellable 0, version 2) instead of replaying "old-1".
func TestLegacyOpIDIsReplayedNeverWritten(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 4)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		old, err := inv.Apply(ctx, alloc("old-1", "A", 2, "2026-12-01", stock.ModeShip))
		wantMoves(t, old, err, mv{"L", stock.Sellable, stock.Allocated, 2})

		a := alloc("new-1", "A", 2, "2026-12-01", stock.ModeShip)
		a.LegacyOpID = "old-1"
		r, err := inv.Apply(ctx, a)
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 2})
		if !r.Replayed || r.OpID != "new-1" || r.LegacyOpID != "old-1" || r.Version != old.Version {
			t.Fatalf("legacy replay: %+v, want old-1's answer, replayed, named new-1", r)
		}
		if snap, _ := inv.Snapshot(ctx, "A"); snap.Version != 1 || snap.Lots[0].Sellable != 2 {
			t.Fatalf("the legacy replay moved stock: %+v", snap)
		}
		// A remembered failure replays the same way.
		if _, err := inv.Apply(ctx, alloc("old-2", "A", 9, "2026-12-01", stock.ModeShip)); !errors.Is(err, stock.ErrShortage) {
			t.Fatalf("old-2: %v", err)
		}
		b := alloc("new-2", "A", 9, "2026-12-01", stock.ModeShip)
		b.LegacyOpID = "old-2"
		if r, err := inv.Apply(ctx, b); !errors.Is(err, stock.ErrShortage) || !r.Replayed {
			t.Fatalf("legacy replay of a failure: %+v %v", r, err)
		}

		// Neither id has a record: it applies, under its own id only.
		c := alloc("new-3", "A", 1, "2026-12-01", stock.ModeShip)
		c.LegacyOpID = "old-3"
		r, err = inv.Apply(ctx, c)
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		if r.Replayed {
			t.Fatalf("new-3: %+v, want applied", r)
		}
		r, err = inv.Apply(ctx, alloc("old-3", "A", 1, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		if r.Replayed {
			t.Fatalf("old-3 after new-3: %+v, want applied (nothing is written under a legacy id)", r)
		}

		// The op id's own record wins over the legacy one.
		d := alloc("new-3", "A", 1, "2026-12-01", stock.ModeShip)
		d.LegacyOpID = "old-1"
		r, err = inv.Apply(ctx, d)
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		if !r.Replayed || r.Version != 2 {
			t.Fatalf("new-3 again: %+v, want its own answer (version 2)", r)
		}
	})
}

func TestHiddenNeverCandidate(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.HoldRequest{OpID: "h", SKU: "A", LotID: "L", Qty: 4, Reason: "count"})
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Hidden, 4})
		_, err = inv.Apply(ctx, alloc("o1", "A", 2, "2026-12-01", stock.ModeReserve))
		wantErr(t, err, stock.ErrShortage)
		_, err = inv.Apply(ctx, stock.ReleaseHoldRequest{OpID: "u", SKU: "A", LotID: "L", Qty: 5, Reason: "count done"})
		wantErr(t, err, stock.ErrInsufficient)
		r, err = inv.Apply(ctx, stock.ReleaseHoldRequest{OpID: "u2", SKU: "A", LotID: "L", Qty: 4, Reason: "count done"})
		wantMoves(t, r, err, mv{"L", stock.Hidden, stock.Sellable, 4})
	})
}

func TestLifecycleReleaseConfirmShip(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 2), lot("L2", stock.KindOnHand, 2, "2027-02-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("a", "A", 4, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 2}, mv{"L2", stock.Sellable, stock.Reserved, 2})
		// Partial release: the caller takes from the line's lots in reverse allocation order.
		r, err = inv.Apply(ctx, stock.ReleaseRequest{OpID: "rel", SKU: "A", From: stock.Reserved, Lots: []stock.LotQty{{LotID: "L2", Qty: 1}}})
		wantMoves(t, r, err, mv{"L2", stock.Reserved, stock.Sellable, 1})
		_, err = inv.Apply(ctx, stock.ConfirmRequest{OpID: "c0", SKU: "A", Lots: []stock.LotQty{{LotID: "L1", Qty: 2}, {LotID: "L2", Qty: 2}}})
		wantErr(t, err, stock.ErrInsufficient) // all or nothing: L1 must not have moved
		_, err = inv.Apply(ctx, stock.ConfirmRequest{OpID: "c1", SKU: "A", Lots: []stock.LotQty{{LotID: "L1", Qty: 2}, {LotID: "nope", Qty: 1}}})
		wantErr(t, err, stock.ErrUnknownLot)
		r, err = inv.Apply(ctx, stock.ConfirmRequest{OpID: "c2", SKU: "A", Lots: []stock.LotQty{{LotID: "L1", Qty: 1}, {LotID: "L2", Qty: 1}, {LotID: "L1", Qty: 1}}})
		wantMoves(t, r, err, mv{"L1", stock.Reserved, stock.Allocated, 1}, mv{"L2", stock.Reserved, stock.Allocated, 1}, mv{"L1", stock.Reserved, stock.Allocated, 1})
		if len(r.Lots) != 2 || r.Lots[0].Allocated != 2 || r.Lots[0].Reserved != 0 {
			t.Fatalf("lots %+v", r.Lots)
		}
		r, err = inv.Apply(ctx, stock.ShipRequest{OpID: "s", SKU: "A", Lots: []stock.LotQty{{LotID: "L1", Qty: 2}}})
		wantMoves(t, r, err, mv{"L1", stock.Allocated, stock.Shipped, 2})
		r, err = inv.Apply(ctx, stock.ReleaseRequest{OpID: "rel2", SKU: "A", From: stock.Allocated, Lots: []stock.LotQty{{LotID: "L2", Qty: 1}}})
		wantMoves(t, r, err, mv{"L2", stock.Allocated, stock.Sellable, 1})
		snap, _ := inv.Snapshot(ctx, "A")
		want := []stock.Lot{s.Lots[0], s.Lots[1]}
		want[0].Sellable, want[0].Shipped = 0, 2
		want[1].Sellable = 5
		if snap.Version != 5 || !reflect.DeepEqual(snap.Lots, want) {
			t.Fatalf("snapshot %+v", snap)
		}
	})
}

func TestReceive(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("old", stock.KindOnHand, 1, "2027-05-01", 1),
		lot("p1", stock.KindPlanned, 2, "", 10),
		lot("p2", stock.KindPlanned, 3, "", 10),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("a", "A", 3, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"old", stock.Sellable, stock.Reserved, 1}, mv{"p2", stock.Sellable, stock.Reserved, 2})
		// p1 arrives short (8 of 10) with an earlier best-before: first in FEFO now.
		r, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "rc1", SKU: "A", LotID: "p1", BestBefore: "2027-01-01", Qty: 8})
		wantMoves(t, r, err, mv{"p1", stock.Sellable, stock.External, 2})
		if r.Lots[0].Kind != stock.KindOnHand || r.Lots[0].BestBefore != "2027-01-01" {
			t.Fatalf("received lot %+v", r.Lots[0])
		}
		_, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "rc2", SKU: "A", LotID: "p1", BestBefore: "2027-01-01"})
		wantErr(t, err, stock.ErrLotState)
		// p2 arrives with more than planned (12 of 10, 2 of them reserved).
		r, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "rc3", SKU: "A", LotID: "p2", BestBefore: "2027-03-01", Qty: 12})
		wantMoves(t, r, err, mv{"p2", stock.External, stock.Sellable, 2})
		r, err = inv.Apply(ctx, alloc("b", "A", 9, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"p1", stock.Sellable, stock.Allocated, 8}, mv{"p2", stock.Sellable, stock.Allocated, 1})
		_, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "rc4", SKU: "A", LotID: "zz"})
		wantErr(t, err, stock.ErrUnknownLot)
	})
	s2 := stock.SKU{SKU: "B", Lots: []stock.Lot{lot("p", stock.KindPlanned, 1, "", 5)}}
	each(t, []stock.SKU{s2}, func(t *testing.T, inv Inventory) {
		if _, err := inv.Apply(ctx, alloc("a", "B", 4, "2026-12-01", stock.ModeReserve)); err != nil {
			t.Fatal(err)
		}
		// Counted 2 but 4 are reserved: the count cannot take reserved stock away.
		_, err := inv.Apply(ctx, stock.ReceiveRequest{OpID: "r", SKU: "B", LotID: "p", Qty: 2})
		wantErr(t, err, stock.ErrInsufficient)
		r, err := inv.Apply(ctx, stock.ReceiveRequest{OpID: "r2", SKU: "B", LotID: "p"})
		wantMoves(t, r, err)
	})
}

func TestAdjust(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		_, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "a1", SKU: "A", LotID: "L", Delta: -4, Reason: "count"})
		wantErr(t, err, stock.ErrInsufficient)
		r, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "a2", SKU: "A", LotID: "L", Delta: -3, Reason: "broken in aisle 3"})
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.External, 3})
		if r.Reason != "broken in aisle 3" {
			t.Fatalf("reason %q", r.Reason)
		}
		r, err = inv.Apply(ctx, stock.AdjustRequest{OpID: "a3", SKU: "A", LotID: "L", Delta: 7, Reason: "found"})
		wantMoves(t, r, err, mv{"L", stock.External, stock.Sellable, 7})
	})
}

func TestInvalidRequestsNeverReachTheScript(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		cases := []struct {
			name string
			do   func() error
			want error
		}{
			{"zero qty", func() error { _, err := inv.Apply(ctx, alloc("x", "A", 0, "2026-12-01", stock.ModeShip)); return err }, stock.ErrInvalidQuantity},
			{"negative qty", func() error { _, err := inv.Apply(ctx, alloc("x", "A", -1, "2026-12-01", stock.ModeShip)); return err }, stock.ErrInvalidQuantity},
			{"huge qty", func() error {
				_, err := inv.Apply(ctx, alloc("x", "A", stock.MaxQty+1, "2026-12-01", stock.ModeShip))
				return err
			}, stock.ErrInvalidQuantity},
			{"bad date", func() error { _, err := inv.Apply(ctx, alloc("x", "A", 1, "2026-12-1", stock.ModeShip)); return err }, stock.ErrInvalidRequest},
			{"no date", func() error { _, err := inv.Apply(ctx, alloc("x", "A", 1, "", stock.ModeShip)); return err }, stock.ErrInvalidRequest},
			{"feb 30", func() error { _, err := inv.Apply(ctx, alloc("x", "A", 1, "2026-02-30", stock.ModeShip)); return err }, stock.ErrInvalidRequest},
			{"bad mode", func() error { _, err := inv.Apply(ctx, alloc("x", "A", 1, "2026-12-01", "both")); return err }, stock.ErrInvalidRequest},
			{"no op id", func() error { _, err := inv.Apply(ctx, alloc("", "A", 1, "2026-12-01", stock.ModeShip)); return err }, stock.ErrInvalidRequest},
			{"brace in sku", func() error { _, err := inv.Apply(ctx, alloc("x", "A}", 1, "2026-12-01", stock.ModeShip)); return err }, stock.ErrInvalidRequest},
			{"release from sellable", func() error {
				_, err := inv.Apply(ctx, stock.ReleaseRequest{OpID: "x", SKU: "A", From: stock.Sellable, Lots: []stock.LotQty{{LotID: "L", Qty: 1}}})
				return err
			}, stock.ErrInvalidRequest},
			{"release no lots", func() error {
				_, err := inv.Apply(ctx, stock.ReleaseRequest{OpID: "x", SKU: "A", From: stock.Reserved})
				return err
			}, stock.ErrInvalidRequest},
			{"ship zero", func() error {
				_, err := inv.Apply(ctx, stock.ShipRequest{OpID: "x", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 0}}})
				return err
			}, stock.ErrInvalidQuantity},
			{"hide zero", func() error {
				_, err := inv.Apply(ctx, stock.HoldRequest{OpID: "x", SKU: "A", LotID: "L", Reason: "r"})
				return err
			}, stock.ErrInvalidQuantity},
			{"adjust zero", func() error {
				_, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "x", SKU: "A", LotID: "L", Reason: "r"})
				return err
			}, stock.ErrInvalidQuantity},
			{"adjust no reason", func() error {
				_, err := inv.Apply(ctx, stock.AdjustRequest{OpID: "x", SKU: "A", LotID: "L", Delta: 1})
				return err
			}, stock.ErrInvalidRequest},
			{"receive negative", func() error {
				_, err := inv.Apply(ctx, stock.ReceiveRequest{OpID: "x", SKU: "A", LotID: "L", Qty: -1})
				return err
			}, stock.ErrInvalidQuantity},
			{"receive bad date", func() error {
				_, err := inv.Apply(ctx, stock.ReceiveRequest{OpID: "x", SKU: "A", LotID: "L", BestBefore: "tomorrow"})
				return err
			}, stock.ErrInvalidRequest},
			{"legacy op id with a control character", func() error {
				_, err := inv.Apply(ctx, stock.UndoRequest{OpID: "x", LegacyOpID: "old\x01", SKU: "A", From: stock.Sellable, To: stock.Allocated, Lots: []stock.LotQty{{LotID: "L", Qty: 1}}})
				return err
			}, stock.ErrInvalidRequest},
			{"legacy op id too long", func() error {
				a := alloc("x", "A", 1, "2026-12-01", stock.ModeShip)
				a.LegacyOpID = strings.Repeat("o", stock.MaxIDLen+1)
				_, err := inv.Apply(ctx, a)
				return err
			}, stock.ErrInvalidRequest},
			{"lot id with newline", func() error {
				_, err := inv.Apply(ctx, stock.RecallRequest{OpID: "x", SKU: "A", LotID: "L\n", Reason: "r"})
				return err
			}, stock.ErrInvalidRequest},
		}
		for _, c := range cases {
			if err := c.do(); !errors.Is(err, c.want) {
				t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			}
		}
		// None of them was remembered: op id "x" is still free.
		r, err := inv.Apply(ctx, alloc("x", "A", 1, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		if r.Version != 1 || r.Replayed {
			t.Fatalf("result %+v", r)
		}
	})
}

func TestUnknownSKUAndAutoLoad(t *testing.T) {
	s := stock.SKU{SKU: "A", Version: 41, Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		_, err := inv.Apply(ctx, alloc("x", "nope", 1, "2026-12-01", stock.ModeShip))
		wantErr(t, err, stock.ErrUnknownSKU)
		if stock.Reason(err) != "ERR_UNKNOWN_SKU" {
			t.Fatalf("reason %q", stock.Reason(err))
		}
		_, err = inv.Snapshot(ctx, "A")
		wantErr(t, err, stock.ErrNotLoaded)
		r, err := inv.Apply(ctx, alloc("y", "A", 1, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Allocated, 1})
		if r.Version != 42 {
			t.Fatalf("version %d, want the loaded version + 1", r.Version)
		}
	})
}

// Concurrent first touches create the SKU once: an allocation applied after the first
// load must never be overwritten by a later load.
func TestConcurrentFirstTouchLoadsOnce(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	const n = 32
	loader := newMemLoader(stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "2027-01-01", 1000)}})
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: loader})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := l.load(ctx, "A")
			if err != nil {
				t.Error(err)
			}
			if _, err := l.Apply(ctx, alloc(fmt.Sprint("o", i), "A", 1, "2026-12-01", stock.ModeShip)); err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				created++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	snap, err := l.Snapshot(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	if created != 1 || snap.Lots[0].Sellable != 1000-n || snap.Lots[0].Allocated != n || snap.Version != n {
		t.Fatalf("created %d times, state %+v", created, snap)
	}
}

func TestScanSKUs(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	var skus []stock.SKU
	for _, id := range []string{"A", "B", "C:1", "with space"} {
		skus = append(skus, stock.SKU{SKU: id, Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "", 1)}})
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(skus...)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skus {
		if _, err := l.Apply(ctx, alloc("op", s.SKU, 1, "2026-12-01", stock.ModeShip)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	if err := l.ScanSKUs(ctx, func(sku string) error { got[sku] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !got["A"] || !got["C:1"] || !got["with space"] {
		t.Fatalf("scanned %v", got)
	}
}

func TestOpRecordExpires(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 1, "", 5)}}), OpRetention: 90 * 60e9})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, alloc("op", "A", 1, "2026-12-01", stock.ModeShip)); err != nil {
		t.Fatal(err)
	}
	ttl, err := rc.TTL(ctx, opKey(prefix, "A", "op")).Result()
	if err != nil || ttl <= 89*60e9 || ttl > 90*60e9 {
		t.Fatalf("op record ttl %v %v", ttl, err)
	}
	if ttl, _ := rc.TTL(ctx, Key(prefix, "A")).Result(); ttl != -1 {
		t.Fatalf("SKU hash ttl %v, want none", ttl)
	}
}

// A SKU with many lots loads in slices (the Lua stack bounds unpack) and reads back whole.
func TestLoadManyLots(t *testing.T) {
	s := stock.SKU{SKU: "BIG", SafetyStock: 7, Version: 3, Lots: []stock.Lot{}}
	for i := range 1200 {
		l := lot(fmt.Sprintf("L%04d", i), stock.KindOnHand, int64(i), fmt.Sprintf("2027-%02d-01", 1+i%12), int64(i%3))
		if i%5 == 0 {
			l.Kind = stock.KindPlanned
		}
		s.Lots = append(s.Lots, l)
	}
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Load(ctx, "BIG"); err != nil {
		t.Fatal(err)
	}
	snap, err := l.Snapshot(ctx, "BIG")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, s) {
		t.Fatal("snapshot differs from the loaded SKU")
	}
	m := stock.NewModel(newMemLoader(s))
	for i, q := range []int64{1, 500, 2} {
		req := alloc(fmt.Sprint("op", i), "BIG", q, "2026-12-01", stock.ModeReserve)
		rr, rerr := l.Apply(ctx, req)
		mr, merr := m.Apply(ctx, req)
		if stock.Reason(rerr) != stock.Reason(merr) || !reflect.DeepEqual(rr, mr) {
			t.Fatalf("allocation %d differs:\n%+v %v\n%+v %v", i, rr, rerr, mr, merr)
		}
	}
}

// Only the ledger's own verdicts reject an operation; errors that may pass on a retry do not.
func TestRejection(t *testing.T) {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{nil, ""},
		{stock.OpError("alloc", "A", stock.ErrShortage, ""), "ERR_SHORTAGE"},
		{stock.OpError("alloc", "A", stock.ErrUnknownSKU, ""), "ERR_UNKNOWN_SKU"},
		{stock.OpError("alloc", "A", stock.ErrNotLoaded, ""), ""},
		{fmt.Errorf("ledger: alloc sku=A: %w", errors.New("redis: connection pool timeout")), ""},
		{fmt.Errorf("ledger: alloc sku=A: %w", context.DeadlineExceeded), ""},
	} {
		reason, ok := stock.Rejection(c.err)
		if reason != c.reason || ok != (c.reason != "") {
			t.Errorf("Rejection(%v) = %q %v, want %q", c.err, reason, ok, c.reason)
		}
	}
}

// Undo moves an order's operation back, lot by lot, and only for the operations an
// order makes; each move carries the version its operation left.
func TestUndo(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 5)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, alloc("a", "A", 3, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 3})
		r, err = inv.Apply(ctx, stock.ConfirmRequest{OpID: "c", SKU: "A", Lots: []stock.LotQty{{LotID: "L1", Qty: 3}}})
		wantMoves(t, r, err, mv{"L1", stock.Reserved, stock.Allocated, 3})
		r, err = inv.Apply(ctx, stock.UndoRequest{OpID: "c-undo", SKU: "A", From: stock.Reserved, To: stock.Allocated, Lots: []stock.LotQty{{LotID: "L1", Qty: 3}}})
		wantMoves(t, r, err, mv{"L1", stock.Allocated, stock.Reserved, 3})
		if r.Moves[0].Version != r.Version || r.Version != 3 {
			t.Fatalf("undo at version %d, its move at %d; want 3", r.Version, r.Moves[0].Version)
		}
		// The bucket no longer holds what the undo would take back.
		_, err = inv.Apply(ctx, stock.UndoRequest{OpID: "c-undo-2", SKU: "A", From: stock.Reserved, To: stock.Allocated, Lots: []stock.LotQty{{LotID: "L1", Qty: 1}}})
		wantErr(t, err, stock.ErrInsufficient)
		// Not an operation an order makes: hidden stock is never an order's.
		_, err = inv.Apply(ctx, stock.UndoRequest{OpID: "h-undo", SKU: "A", From: stock.Sellable, To: stock.Hidden, Lots: []stock.LotQty{{LotID: "L1", Qty: 1}}})
		wantErr(t, err, stock.ErrInvalidRequest)
		r, err = inv.Apply(ctx, stock.UndoRequest{OpID: "a-undo", SKU: "A", From: stock.Sellable, To: stock.Reserved, Lots: []stock.LotQty{{LotID: "L1", Qty: 3}}})
		wantMoves(t, r, err, mv{"L1", stock.Reserved, stock.Sellable, 3})
		snap, _ := inv.Snapshot(ctx, "A")
		if l := snap.Lots[0]; l.Sellable != 5 || l.Reserved != 0 || l.Allocated != 0 {
			t.Fatalf("after the undos %+v, want all 5 sellable", l)
		}
	})
}

// cloneSKU returns a copy of s with its lots in registration order, as Snapshot answers.
func cloneSKU(s stock.SKU) stock.SKU {
	s.Lots = slices.Clone(s.Lots)
	if s.Lots == nil {
		s.Lots = []stock.Lot{}
	}
	stock.SortLots(s.Lots)
	s.Transfers = slices.Clone(s.Transfers)
	return s
}
