package ledger

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// A lot registered on a live SKU is its newest: a planned one is the first LIFO takes, an
// on-hand one the last of its best-before in FEFO order.
func TestRegisteredLotTakesItsPlaceInAllocationOrder(t *testing.T) {
	s := SKU{SKU: "A", Lots: []Lot{
		lot("oh", KindOnHand, 4, "2027-01-01", 1),
		lot("p-old", KindPlanned, 7, "", 5),
	}}
	each(t, []SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, RegisterLotRequest{OpID: "r1", SKU: "A", Lot: NewLot{LotID: "p-new", Kind: KindPlanned, Good: true, Sellable: 3}})
		wantMoves(t, r, err, mv{"p-new", External, Sellable, 3})
		if l := r.Lots[0]; l.RegSeq != 8 || l.ValidFrom != MinDate || l.ValidTo != MaxDate || !l.Good || r.Version != 1 {
			t.Fatalf("registered lot %+v (version %d)", l, r.Version)
		}
		r, err = inv.Apply(ctx, RegisterLotRequest{OpID: "r2", SKU: "A", Lot: NewLot{LotID: "oh-same-bb", Kind: KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 1}})
		wantMoves(t, r, err, mv{"oh-same-bb", External, Sellable, 1})
		r, err = inv.Apply(ctx, alloc("o1", "A", 4, "2026-12-01", ModeReserve))
		wantMoves(t, r, err, mv{"oh", Sellable, Reserved, 1}, mv{"oh-same-bb", Sellable, Reserved, 1}, mv{"p-new", Sellable, Reserved, 2})
		_, err = inv.Apply(ctx, RegisterLotRequest{OpID: "r3", SKU: "A", Lot: NewLot{LotID: "oh", Kind: KindOnHand, Good: true, Sellable: 1}})
		wantErr(t, err, ErrLotExists)
		_, err = inv.Apply(ctx, RegisterLotRequest{OpID: "r4", SKU: "NOPE", Lot: NewLot{LotID: "x", Kind: KindOnHand, Good: true, Sellable: 1}})
		wantErr(t, err, ErrUnknownSKU)
		_, err = inv.Apply(ctx, RegisterLotRequest{OpID: "r5", SKU: "A", Lot: NewLot{LotID: "y", Kind: KindPlanned, BestBefore: "2027-01-01", Sellable: 1}})
		wantErr(t, err, ErrInvalidRequest)
		_, err = inv.Apply(ctx, RegisterLotRequest{OpID: "r6", SKU: "A", Lot: NewLot{LotID: "z", Kind: KindOnHand}})
		wantErr(t, err, ErrInvalidQuantity)
	})
}

// RegisterSKU creates only a SKU that neither Redis nor the loader knows; the first
// answer of an op id is kept.
func TestRegisterSKU(t *testing.T) {
	inPG := SKU{SKU: "PG", Lots: []Lot{lot("L", KindOnHand, 0, "", 1)}}
	each(t, []SKU{inPG}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 3})
		wantMoves(t, r, err)
		if r.Version != 1 || r.SafetyStock != 3 {
			t.Fatalf("registered %+v", r)
		}
		r, err = inv.Apply(ctx, RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 3})
		if err != nil || !r.Replayed || r.SafetyStock != 3 {
			t.Fatalf("replay: %+v %v", r, err)
		}
		_, err = inv.Apply(ctx, RegisterSKURequest{OpID: "s1", SKU: "NEW", SafetyStock: 9})
		wantErr(t, err, ErrOpConflict)
		_, err = inv.Apply(ctx, RegisterSKURequest{OpID: "s2", SKU: "NEW"})
		wantErr(t, err, ErrSKUExists)
		_, err = inv.Apply(ctx, RegisterSKURequest{OpID: "s3", SKU: "PG"})
		wantErr(t, err, ErrSKUExists)
		snap, err := inv.Snapshot(ctx, "NEW")
		if err != nil || snap.SafetyStock != 3 || snap.Version != 1 || len(snap.Lots) != 0 {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		r, err = inv.Apply(ctx, SafetyStockRequest{OpID: "ss1", SKU: "NEW", SafetyStock: 7})
		wantMoves(t, r, err)
		if r.Version != 2 || r.SafetyStock != 7 {
			t.Fatalf("safety stock %+v", r)
		}
		_, err = inv.Apply(ctx, RegisterSKURequest{OpID: "s4", SKU: "NEG", SafetyStock: -1})
		wantErr(t, err, ErrInvalidQuantity)
	})
}

// A recall lists the orders holding the lot, from the holders the order operations
// named: what they hold after allocations, releases and shipments; capped in the result.
func TestRecallListsTheHolders(t *testing.T) {
	s := SKU{SKU: "A", Lots: []Lot{lot("L", KindOnHand, 0, "2027-01-01", 1000)}}
	each(t, []SKU{s}, func(t *testing.T, inv Inventory) {
		a := alloc("a1", "A", 5, "2026-12-01", ModeReserve)
		a.Holder = "o1"
		_, err := inv.Apply(ctx, a)
		wantErr(t, err, nil)
		a = alloc("a2", "A", 3, "2026-12-01", ModeShip)
		a.Holder = "o2"
		_, err = inv.Apply(ctx, a)
		wantErr(t, err, nil)
		_, err = inv.Apply(ctx, ReleaseRequest{OpID: "rel", SKU: "A", From: Reserved, Lots: []LotQty{{LotID: "L", Qty: 2}}, Holder: "o1"})
		wantErr(t, err, nil)
		_, err = inv.Apply(ctx, ShipRequest{OpID: "shp", SKU: "A", Lots: []LotQty{{LotID: "L", Qty: 3}}, Holder: "o2"})
		wantErr(t, err, nil)
		for i := range MaxResultHolders + 1 {
			a := alloc(fmt.Sprint("b", i), "A", 1, "2026-12-01", ModeReserve)
			a.Holder = fmt.Sprintf("p%03d", i)
			if _, err := inv.Apply(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		_, err = inv.Apply(ctx, HoldRequest{OpID: "h", SKU: "A", LotID: "L", Qty: 10, Reason: "qa"})
		wantErr(t, err, nil)
		r, err := inv.Apply(ctx, RecallRequest{OpID: "rc", SKU: "A", LotID: "L", Reason: "supplier"})
		left := int64(1000 - 5 - 3 - (MaxResultHolders + 1))
		wantMoves(t, r, err, mv{"L", Sellable, Defective, left - 10 + 2}, mv{"L", Hidden, Defective, 10})
		if r.HolderCount != MaxResultHolders+2 || len(r.Holders) != MaxResultHolders {
			t.Fatalf("holders %d listed, %d counted", len(r.Holders), r.HolderCount)
		}
		if r.Holders[0] != (Holder{LCID: "o1", LotID: "L", Qty: 3}) || r.Holders[1].LCID != "p000" || r.Reason != "supplier" {
			t.Fatalf("holders start %+v, reason %q", r.Holders[:2], r.Reason)
		}
		if l := r.Lots[0]; l.Good || l.Sellable != 0 || l.Hidden != 0 || l.Reserved != 3+MaxResultHolders+1 {
			t.Fatalf("recalled lot %+v", l)
		}
		_, err = inv.Apply(ctx, alloc("after", "A", 1, "2026-12-01", ModeReserve))
		wantErr(t, err, ErrShortage)
	})
}

// Returns go back to sellable or to defective; damage and holds move between their buckets.
func TestReturnsDamageAndHolds(t *testing.T) {
	l := lot("L", KindOnHand, 0, "2027-01-01", 10)
	l.Shipped = 4
	each(t, []SKU{{SKU: "A", Lots: []Lot{l}}}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, ReturnRequest{OpID: "r1", SKU: "A", Lots: []LotQty{{LotID: "L", Qty: 1}}})
		wantMoves(t, r, err, mv{"L", Shipped, Sellable, 1})
		r, err = inv.Apply(ctx, ReturnRequest{OpID: "r2", SKU: "A", Lots: []LotQty{{LotID: "L", Qty: 2}}, Defective: true})
		wantMoves(t, r, err, mv{"L", Shipped, Defective, 2})
		_, err = inv.Apply(ctx, ReturnRequest{OpID: "r3", SKU: "A", Lots: []LotQty{{LotID: "L", Qty: 2}}})
		wantErr(t, err, ErrInsufficient)
		r, err = inv.Apply(ctx, DamageRequest{OpID: "d1", SKU: "A", LotID: "L", Qty: 3, Reason: "crushed"})
		wantMoves(t, r, err, mv{"L", Sellable, Defective, 3})
		if r.Reason != "crushed" || r.Lots[0].Defective != 5 || r.Lots[0].Sellable != 8 {
			t.Fatalf("after damage %+v", r)
		}
		_, err = inv.Apply(ctx, DamageRequest{OpID: "d2", SKU: "A", LotID: "L", Qty: 3})
		wantErr(t, err, ErrInvalidRequest) // no reason
		_, err = inv.Apply(ctx, UndoRequest{OpID: "r1-undo", SKU: "A", From: Shipped, To: Sellable, Lots: []LotQty{{LotID: "L", Qty: 1}}})
		wantErr(t, err, nil)
	})
}

// The candidate index stays exact while registrations grow one chunk past twice the
// load's size (it splits) and allocations drain every lot of a chunk (it goes, and the
// chunks after it are renamed), against the model after every step.
func TestIndexChunksSplitAndDrop(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := SKU{SKU: "A", Lots: []Lot{}}
	for i := range 40 { // chunks of 32 and 8
		s.Lots = append(s.Lots, lot(fmt.Sprintf("L%02d", i), KindOnHand, int64(i), "2027-06-01", 1))
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(newMemLoader(s))
	step := func(name string, run func(inv Inventory) (Result, error)) {
		t.Helper()
		rr, rerr := run(l)
		mr, merr := run(m)
		if Reason(rerr) != Reason(merr) || !reflect.DeepEqual(normal(rr), normal(mr)) {
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
		step(fmt.Sprint("register ", i), func(inv Inventory) (Result, error) {
			return inv.Apply(ctx, RegisterLotRequest{OpID: fmt.Sprint("r", i), SKU: "A",
				Lot: NewLot{LotID: fmt.Sprintf("E%02d", i), Kind: KindOnHand, Good: true, BestBefore: "2027-01-01", Sellable: 1}})
		})
	}
	if n := chunks(); n != 3 {
		t.Fatalf("%d chunks after the registrations, want 3 (a split)", n)
	}
	// Drain them in FEFO order: the first chunk empties and goes.
	for i := range 40 {
		step(fmt.Sprint("allocate ", i), func(inv Inventory) (Result, error) {
			return inv.Apply(ctx, AllocateRequest{OpID: fmt.Sprint("a", i), SKU: "A", Qty: 1, TargetDate: "2026-12-01", Mode: ModeReserve})
		})
	}
	if n := chunks(); n != 2 {
		t.Fatalf("%d chunks after draining the first, want 2", n)
	}
	step("drain all", func(inv Inventory) (Result, error) {
		return inv.Apply(ctx, AllocateRequest{OpID: "all", SKU: "A", Qty: 40, TargetDate: "2026-12-01", Mode: ModeReserve})
	})
	if n := chunks(); n != 1 {
		t.Fatalf("%d chunks with nothing sellable, want 1 (empty)", n)
	}
}
