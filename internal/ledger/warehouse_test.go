package ledger

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// A lot registered on a live SKU is its newest: a planned one is the first LIFO takes, an
// on-hand one the last of its best-before in FEFO order.
func TestRegisteredLotTakesItsPlaceInAllocationOrder(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("oh", stock.KindOnHand, 4, "2027-01-01", 1),
		lot("p-old", stock.KindPlanned, 7, "", 5),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r1", SKU: "A", Lot: stock.NewLot{LotID: "p-new", Kind: stock.KindPlanned, Good: true, Sellable: 3}})
		wantMoves(t, r, err, mv{"p-new", stock.External, stock.Sellable, 3})
		if l := r.Lots[0]; l.RegSeq != 8 || l.ValidFrom != stock.MinDate || l.ValidTo != stock.MaxDate || !l.Good || r.Version != 1 {
			t.Fatalf("registered lot %+v (version %d)", l, r.Version)
		}
		r, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "oh-same-bb", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 1}})
		wantMoves(t, r, err, mv{"oh-same-bb", stock.External, stock.Sellable, 1})
		r, err = inv.Apply(ctx, alloc("o1", "A", 4, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"oh", stock.Sellable, stock.Reserved, 1}, mv{"oh-same-bb", stock.Sellable, stock.Reserved, 1}, mv{"p-new", stock.Sellable, stock.Reserved, 2})
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r3", SKU: "A", Lot: stock.NewLot{LotID: "oh", Kind: stock.KindOnHand, Good: true, Sellable: 1}})
		wantErr(t, err, stock.ErrLotExists)
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r4", SKU: "NOPE", Lot: stock.NewLot{LotID: "x", Kind: stock.KindOnHand, Good: true, Sellable: 1}})
		wantErr(t, err, stock.ErrUnknownSKU)
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r5", SKU: "A", Lot: stock.NewLot{LotID: "y", Kind: stock.KindPlanned, BestBefore: "2027-01-01", Sellable: 1}})
		wantErr(t, err, stock.ErrInvalidRequest)
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r6", SKU: "A", Lot: stock.NewLot{LotID: "z", Kind: stock.KindOnHand}})
		wantErr(t, err, stock.ErrInvalidQuantity)
	})
}

// RegisterSKU creates only a SKU that neither Redis nor the loader knows; the first
// answer of an op id is kept.
func TestRegisterSKU(t *testing.T) {
	inPG := stock.SKU{SKU: "PG", Lots: []stock.Lot{lot("L", stock.KindOnHand, 0, "", 1)}}
	each(t, []stock.SKU{inPG}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 3})
		wantMoves(t, r, err)
		if r.Version != 1 || r.SafetyStock != 3 {
			t.Fatalf("registered %+v", r)
		}
		r, err = inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 3})
		if err != nil || !r.Replayed || r.SafetyStock != 3 {
			t.Fatalf("replay: %+v %v", r, err)
		}
		_, err = inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 9})
		wantErr(t, err, stock.ErrOpConflict)
		_, err = inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s2", SKU: "NEW"})
		wantErr(t, err, stock.ErrSKUExists)
		_, err = inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s3", SKU: "PG"})
		wantErr(t, err, stock.ErrSKUExists)
		snap, err := inv.Snapshot(ctx, "NEW")
		if err != nil || snap.SafetyStock != 3 || snap.Version != 1 || len(snap.Lots) != 0 {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		r, err = inv.Apply(ctx, stock.SafetyStockRequest{OpID: "ss1", SKU: "NEW", SafetyStock: 7})
		wantMoves(t, r, err)
		if r.Version != 2 || r.SafetyStock != 7 {
			t.Fatalf("safety stock %+v", r)
		}
		_, err = inv.Apply(ctx, stock.RegisterSKURequest{OpID: "s4", SKU: "NEG", SafetyStock: -1})
		wantErr(t, err, stock.ErrInvalidQuantity)
	})
}

// A recall lists the orders holding the lot, from the holders the order operations
// named: what they hold after allocations, releases and shipments; capped in the result.
func TestRecallListsTheHolders(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 0, "2027-01-01", 1000)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("a1", "A", 5, "2026-12-01", stock.ModeReserve)
		a.Holder = "o1"
		_, err := inv.Apply(ctx, a)
		wantErr(t, err, nil)
		a = alloc("a2", "A", 3, "2026-12-01", stock.ModeShip)
		a.Holder = "o2"
		_, err = inv.Apply(ctx, a)
		wantErr(t, err, nil)
		_, err = inv.Apply(ctx, stock.ReleaseRequest{OpID: "rel", SKU: "A", From: stock.Reserved, Lots: []stock.LotQty{{LotID: "L", Qty: 2}}, Holder: "o1"})
		wantErr(t, err, nil)
		_, err = inv.Apply(ctx, stock.ShipRequest{OpID: "shp", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 3}}, Holder: "o2"})
		wantErr(t, err, nil)
		for i := range stock.MaxResultHolders + 1 {
			a := alloc(fmt.Sprint("b", i), "A", 1, "2026-12-01", stock.ModeReserve)
			a.Holder = fmt.Sprintf("p%03d", i)
			if _, err := inv.Apply(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		_, err = inv.Apply(ctx, stock.HoldRequest{OpID: "h", SKU: "A", LotID: "L", Qty: 10, Reason: "qa"})
		wantErr(t, err, nil)
		r, err := inv.Apply(ctx, stock.RecallRequest{OpID: "rc", SKU: "A", LotID: "L", Reason: "supplier"})
		left := int64(1000 - 5 - 3 - (stock.MaxResultHolders + 1))
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Defective, left - 10 + 2}, mv{"L", stock.Hidden, stock.Defective, 10})
		if r.HolderCount != stock.MaxResultHolders+2 || len(r.Holders) != stock.MaxResultHolders {
			t.Fatalf("holders %d listed, %d counted", len(r.Holders), r.HolderCount)
		}
		if r.Holders[0] != (stock.Holder{LCID: "o1", LotID: "L", Qty: 3}) || r.Holders[1].LCID != "p000" || r.Reason != "supplier" {
			t.Fatalf("holders start %+v, reason %q", r.Holders[:2], r.Reason)
		}
		if l := r.Lots[0]; l.Good || l.Sellable != 0 || l.Hidden != 0 || l.Reserved != 3+stock.MaxResultHolders+1 {
			t.Fatalf("recalled lot %+v", l)
		}
		_, err = inv.Apply(ctx, alloc("after", "A", 1, "2026-12-01", stock.ModeReserve))
		wantErr(t, err, stock.ErrShortage)
	})
}

// Returns go back to sellable or to defective; damage and holds move between their buckets.
func TestReturnsDamageAndHolds(t *testing.T) {
	l := lot("L", stock.KindOnHand, 0, "2027-01-01", 10)
	l.Shipped = 4
	each(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{l}}}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.ReturnRequest{OpID: "r1", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 1}}})
		wantMoves(t, r, err, mv{"L", stock.Shipped, stock.Sellable, 1})
		r, err = inv.Apply(ctx, stock.ReturnRequest{OpID: "r2", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 2}}, Defective: true})
		wantMoves(t, r, err, mv{"L", stock.Shipped, stock.Defective, 2})
		_, err = inv.Apply(ctx, stock.ReturnRequest{OpID: "r3", SKU: "A", Lots: []stock.LotQty{{LotID: "L", Qty: 2}}})
		wantErr(t, err, stock.ErrInsufficient)
		r, err = inv.Apply(ctx, stock.DamageRequest{OpID: "d1", SKU: "A", LotID: "L", Qty: 3, Reason: "crushed"})
		wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Defective, 3})
		if r.Reason != "crushed" || r.Lots[0].Defective != 5 || r.Lots[0].Sellable != 8 {
			t.Fatalf("after damage %+v", r)
		}
		_, err = inv.Apply(ctx, stock.DamageRequest{OpID: "d2", SKU: "A", LotID: "L", Qty: 3})
		wantErr(t, err, stock.ErrInvalidRequest) // no reason
		_, err = inv.Apply(ctx, stock.UndoRequest{OpID: "r1-undo", SKU: "A", From: stock.Shipped, To: stock.Sellable, Lots: []stock.LotQty{{LotID: "L", Qty: 1}}})
		wantErr(t, err, nil)
	})
}

// The candidate index stays exact while registrations grow one chunk past twice the
// load's size (it splits) and allocations drain every lot of a chunk (it goes, and the
// chunks after it are renamed), against the model after every step.
func TestIndexChunksSplitAndDrop(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{}}
	for i := range 40 { // chunks of 32 and 8
		s.Lots = append(s.Lots, lot(fmt.Sprintf("L%02d", i), stock.KindOnHand, int64(i), "2027-06-01", 1))
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	m := stock.NewModel(newMemLoader(s))
	step := func(name string, run func(inv Inventory) (stock.Result, error)) {
		t.Helper()
		rr, rerr := run(l)
		mr, merr := run(m)
		if stock.Reason(rerr) != stock.Reason(merr) || !reflect.DeepEqual(normal(rr), normal(mr)) {
			t.Fatalf("%s: redis %+v %v, model %+v %v", name, rr, rerr, mr, merr)
		}
		h, err := rc.HGetAll(ctx, Key(prefix, "A")).Result()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := decodeHash("A", h)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkIndex(h, snap.Lots); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	chunks := func() int {
		n, _ := rc.HGet(ctx, Key(prefix, "A"), fieldChunks).Int()
		return n
	}
	// 40 on-hand lots that sort before every loaded one: the first chunk takes them all
	// and splits when it passes 64 records.
	for i := range 40 {
		step(fmt.Sprint("register ", i), func(inv Inventory) (stock.Result, error) {
			return inv.Apply(ctx, stock.RegisterLotRequest{OpID: fmt.Sprint("r", i), SKU: "A",
				Lot: stock.NewLot{LotID: fmt.Sprintf("E%02d", i), Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 1}})
		})
	}
	if n := chunks(); n != 3 {
		t.Fatalf("%d chunks after the registrations, want 3 (a split)", n)
	}
	// Drain them in FEFO order: the first chunk empties and goes.
	for i := range 40 {
		step(fmt.Sprint("allocate ", i), func(inv Inventory) (stock.Result, error) {
			return inv.Apply(ctx, stock.AllocateRequest{OpID: fmt.Sprint("a", i), SKU: "A", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeReserve})
		})
	}
	if n := chunks(); n != 2 {
		t.Fatalf("%d chunks after draining the first, want 2", n)
	}
	step("drain all", func(inv Inventory) (stock.Result, error) {
		return inv.Apply(ctx, stock.AllocateRequest{OpID: "all", SKU: "A", Qty: 40, TargetDate: "2026-12-01", Mode: stock.ModeReserve})
	})
	if n := chunks(); n != 1 {
		t.Fatalf("%d chunks with nothing sellable, want 1 (empty)", n)
	}
}
