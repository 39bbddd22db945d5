package ledger

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
)

// The waiting demand's rules (docs/ledger.md, "Waiting demand"), each on both the script
// and the Model.

func backorder(op, holder, line string, qty int64, date string, mode stock.Mode, class int) stock.BackorderRequest {
	return stock.BackorderRequest{OpID: op, SKU: "Q", Holder: holder, Line: line, Qty: qty,
		TargetDate: date, Mode: mode, Class: class, QueuedAt: 1_700_000_000_000}
}

func adjust(op, lot string, delta int64) stock.AdjustRequest {
	return stock.AdjustRequest{OpID: op, SKU: "Q", LotID: lot, Delta: delta, Reason: "count"}
}

// queueOf lists the SKU's waiting lines in serving order as "holder/line:want".
func queueOf(t *testing.T, inv Inventory) []string {
	t.Helper()
	var q []stock.QueueEntry
	switch inv := inv.(type) {
	case *Ledger:
		var err error
		if q, err = inv.Queue(ctx, "Q"); err != nil {
			t.Fatal(err)
		}
	case *stock.Model:
		q = inv.Queue("Q")
	}
	out := []string{}
	for _, e := range q {
		out = append(out, fmt.Sprintf("%s/%s:%d", e.Holder, e.Line, e.Want))
	}
	return out
}

// holdingsOf returns what each order holds in the lot: the script's <key>:h:<lot>, the
// Model's Holders.
func holdingsOf(t *testing.T, inv Inventory, lot string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	switch inv := inv.(type) {
	case *Ledger:
		hh, err := inv.rc.HGetAll(ctx, Key(inv.prefix, "Q")+":h:"+lot).Result()
		if err != nil {
			t.Fatal(err)
		}
		for lcid, v := range hh {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[lcid] = n
		}
	case *stock.Model:
		for _, h := range inv.Holders("Q", lot) {
			out[h.LCID] = h.Qty
		}
	}
	return out
}

// fillsOf renders a result's fills as "holder/line:qty=lot:qty,...".
func fillsOf(r stock.Result) []string {
	out := []string{}
	for _, f := range r.Fills {
		var lots []string
		for _, l := range f.Lots {
			lots = append(lots, fmt.Sprintf("%s:%d", l.LotID, l.Qty))
		}
		out = append(out, fmt.Sprintf("%s/%s:%d=%s", f.Holder, f.Line, f.Qty, strings.Join(lots, ",")))
	}
	return out
}

// apply runs op and fails the test on an error.
func apply(t *testing.T, inv Inventory, op stock.Op) stock.Result {
	t.Helper()
	r, err := inv.Apply(ctx, op)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", what, got, want)
	}
}

// A backorder takes what is there and queues the rest at the head; an adjustment that
// brings stock fills the line in the same operation, into the order's holdings.
func TestBackorderQueuesTheRestAndAReceiptFillsIt(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 3)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, backorder("b1", "o1", "l1", 5, "2026-12-01", stock.ModeReserve, 0))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 3})
		if r.Queued != 2 || r.Position != 1 || len(r.Queue) != 1 || r.Queue[0].Want != 2 || r.Queue[0].Seq != 1 ||
			r.Queue[0].Mode != stock.ModeReserve || r.Queue[0].TargetDate != "2026-12-01" || r.Queue[0].QueuedAt != 1_700_000_000_000 {
			t.Fatalf("backorder result %+v", r)
		}
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:2")

		r, err = inv.Apply(ctx, adjust("a1", "L1", 4))
		wantMoves(t, r, err, mv{"L1", stock.External, stock.Sellable, 4}, mv{"L1", stock.Sellable, stock.Reserved, 2})
		wantStrings(t, "fills", fillsOf(r), "o1/l1:2=L1:2")
		if r.FillsMore || len(r.Queue) != 1 || r.Queue[0].Want != 0 || r.Lots[0].Sellable != 2 || r.Lots[0].Reserved != 5 {
			t.Fatalf("adjust result %+v", r)
		}
		wantStrings(t, "queue", queueOf(t, inv))
		if h := holdingsOf(t, inv, "L1"); !reflect.DeepEqual(h, map[string]int64{"o1": 5}) {
			t.Fatalf("holdings %v", h)
		}
	})
}

// queueBehindRelease leaves L1 with 4 sellable units while o1's line waits for 3: o0's
// release brought them, and an order's release does not fill.
func queueBehindRelease(t *testing.T, inv Inventory) {
	t.Helper()
	apply(t, inv, stock.AllocateRequest{OpID: "a0", SKU: "Q", Qty: 4, TargetDate: "2026-12-01", Mode: stock.ModeReserve, Holder: "o0"})
	r := apply(t, inv, backorder("b1", "o1", "l1", 5, "2026-12-01", stock.ModeReserve, 0))
	if r.Queued != 3 {
		t.Fatalf("backorder result %+v", r)
	}
	r, err := inv.Apply(ctx, stock.ReleaseRequest{OpID: "r0", SKU: "Q", From: stock.Reserved, Holder: "o0",
		Lots: []stock.LotQty{{LotID: "L1", Qty: 4}}})
	wantMoves(t, r, err, mv{"L1", stock.Reserved, stock.Sellable, 4})
	wantStrings(t, "release's fills", fillsOf(r))
	wantStrings(t, "queue", queueOf(t, inv), "o1/l1:3")
}

// While a line waits, an allocation sees the sellable less the queue's demand.
func TestNoOvertakingAWaitingLine(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 6)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		queueBehindRelease(t, inv)
		_, err := inv.Apply(ctx, alloc("a1", "Q", 2, "2026-12-01", stock.ModeReserve))
		wantErr(t, err, stock.ErrShortage)
		if !strings.HasSuffix(err.Error(), "requested=2 available=1 queued=3)") {
			t.Fatalf("refusal %v", err)
		}
		r, err := inv.Apply(ctx, alloc("a2", "Q", 1, "2026-12-01", stock.ModeReserve))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 1})
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:3")
	})
}

// An order's release does not fill the queue; a FillRequest after it does.
func TestReleaseDoesNotFillAFillRequestDoes(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 6)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		queueBehindRelease(t, inv)
		r, err := inv.Apply(ctx, stock.FillRequest{OpID: "f1", SKU: "Q"})
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Reserved, 3})
		wantStrings(t, "fills", fillsOf(r), "o1/l1:3=L1:3")
		wantStrings(t, "queue", queueOf(t, inv))
		if h := holdingsOf(t, inv, "L1"); !reflect.DeepEqual(h, map[string]int64{"o1": 5}) {
			t.Fatalf("holdings %v", h)
		}
	})
}

// The queue serves a higher class first, then the lines in the order it queued them.
func TestFillServesClassThenQueueOrder(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("P", stock.KindPlanned, 1, "", 0)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		for i, b := range []struct {
			holder   string
			class    int
			position int64
		}{{"o1", 0, 1}, {"o2", 0, 2}, {"o3", 2, 1}} {
			r := apply(t, inv, backorder(fmt.Sprint("b", i), b.holder, "l1", 3, "2026-12-01", stock.ModeReserve, b.class))
			if r.Queued != 3 || r.Position != b.position || r.Queue[0].Seq != int64(i+1) {
				t.Fatalf("backorder of %s: %+v", b.holder, r)
			}
		}
		wantStrings(t, "queue", queueOf(t, inv), "o3/l1:3", "o1/l1:3", "o2/l1:3")
		r, err := inv.Apply(ctx, stock.ReceiveRequest{OpID: "v1", SKU: "Q", LotID: "P", BestBefore: "2027-01-01", Qty: 5})
		wantMoves(t, r, err, mv{"P", stock.External, stock.Sellable, 5},
			mv{"P", stock.Sellable, stock.Reserved, 3}, mv{"P", stock.Sellable, stock.Reserved, 2})
		wantStrings(t, "fills", fillsOf(r), "o3/l1:3=P:3", "o1/l1:2=P:2")
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:1", "o2/l1:3")
	})
}

// A dequeue lowers a line by part or all; a line not queued is no error; a line queued
// already cannot be backordered again.
func TestDequeue(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 0)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		apply(t, inv, backorder("b1", "o1", "l1", 5, "2026-12-01", stock.ModeShip, 0))
		_, err := inv.Apply(ctx, backorder("b2", "o1", "l1", 1, "2026-12-01", stock.ModeShip, 0))
		wantErr(t, err, stock.ErrQueued)

		r := apply(t, inv, stock.DequeueRequest{OpID: "d1", SKU: "Q", Holder: "o1", Line: "l1", Qty: 2})
		if r.Dequeued != 2 || r.Queued != 3 || len(r.Queue) != 1 || r.Queue[0].Want != 3 {
			t.Fatalf("partial dequeue %+v", r)
		}
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:3")

		r = apply(t, inv, stock.DequeueRequest{OpID: "d2", SKU: "Q", Holder: "o1", Line: "l1"})
		if r.Dequeued != 3 || r.Queued != 0 || len(r.Queue) != 1 || r.Queue[0].Want != 0 {
			t.Fatalf("whole dequeue %+v", r)
		}
		wantStrings(t, "queue", queueOf(t, inv))

		r = apply(t, inv, stock.DequeueRequest{OpID: "d3", SKU: "Q", Holder: "o1", Line: "l1", Qty: 1})
		if r.Dequeued != 0 || r.Queued != 0 || len(r.Queue) != 0 {
			t.Fatalf("dequeue of a line not queued %+v", r)
		}
		// Nothing waits now: the whole stock an adjustment brings is anyone's.
		apply(t, inv, adjust("a1", "L1", 2))
		r, err = inv.Apply(ctx, alloc("a2", "Q", 2, "2026-12-01", stock.ModeShip))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Allocated, 2})
	})
}

// A line whose target date no lot serves is passed over; a later line is filled.
func TestFillPassesOverALineNoLotServes(t *testing.T) {
	old := lot("old", stock.KindOnHand, 1, "2027-01-01", 0)
	old.ValidTo = "2026-12-31"
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{old}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		apply(t, inv, backorder("b1", "late", "l1", 2, "2027-06-01", stock.ModeReserve, 0))
		apply(t, inv, backorder("b2", "early", "l1", 2, "2026-06-01", stock.ModeReserve, 0))
		r, err := inv.Apply(ctx, adjust("a1", "old", 3))
		wantMoves(t, r, err, mv{"old", stock.External, stock.Sellable, 3}, mv{"old", stock.Sellable, stock.Reserved, 2})
		wantStrings(t, "fills", fillsOf(r), "early/l1:2=old:2")
		wantStrings(t, "queue", queueOf(t, inv), "late/l1:2")
	})
}

// One operation fills at most MaxResultFills lines and says so; a FillRequest goes on.
func TestFillStopsAtMaxResultFills(t *testing.T) {
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 0)}}
	n := stock.MaxResultFills + 2
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		for i := range n {
			apply(t, inv, backorder(fmt.Sprint("b", i), fmt.Sprintf("o%02d", i), "l1", 1, "2026-12-01", stock.ModeReserve, 0))
		}
		r := apply(t, inv, adjust("a1", "L1", int64(n)))
		if len(r.Fills) != stock.MaxResultFills || !r.FillsMore || r.Fills[0].Holder != "o00" || r.Fills[stock.MaxResultFills-1].Holder != fmt.Sprintf("o%02d", stock.MaxResultFills-1) {
			t.Fatalf("adjust filled %v, more %v", fillsOf(r), r.FillsMore)
		}
		m := stock.MaxResultFills
		wantStrings(t, "queue", queueOf(t, inv), fmt.Sprintf("o%02d/l1:1", m), fmt.Sprintf("o%02d/l1:1", m+1))
		r = apply(t, inv, stock.FillRequest{OpID: "f1", SKU: "Q"})
		wantStrings(t, "fills", fillsOf(r), fmt.Sprintf("o%02d/l1:1=L1:1", m), fmt.Sprintf("o%02d/l1:1=L1:1", m+1))
		if r.FillsMore {
			t.Fatalf("fill says more: %+v", r)
		}
		wantStrings(t, "queue", queueOf(t, inv))
	})
}

// A lower safety stock fills a ship line, up to what the new safety stock leaves.
func TestLowerSafetyStockFillsAShipLine(t *testing.T) {
	s := stock.SKU{SKU: "Q", SafetyStock: 5, Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 6)}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, backorder("b1", "o1", "l1", 3, "2026-12-01", stock.ModeShip, 0))
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Allocated, 1})
		if r.Queued != 2 {
			t.Fatalf("backorder result %+v", r)
		}
		r, err = inv.Apply(ctx, stock.SafetyStockRequest{OpID: "s1", SKU: "Q", SafetyStock: 4})
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Allocated, 1})
		wantStrings(t, "fills", fillsOf(r), "o1/l1:1=L1:1")
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:1")
		r, err = inv.Apply(ctx, stock.SafetyStockRequest{OpID: "s2", SKU: "Q", SafetyStock: 2})
		wantMoves(t, r, err, mv{"L1", stock.Sellable, stock.Allocated, 1})
		wantStrings(t, "fills", fillsOf(r), "o1/l1:1=L1:1")
		wantStrings(t, "queue", queueOf(t, inv))
		if h := holdingsOf(t, inv, "L1"); !reflect.DeepEqual(h, map[string]int64{"o1": 3}) {
			t.Fatalf("holdings %v", h)
		}
	})
}

// A change's allocation, a moved allocation and a routed allocation hold the queue's
// demand back as a plain allocation does.
func TestNoOvertakingByChangeMoveOrRoute(t *testing.T) {
	store := lot("S1", stock.KindOnHand, 2, "2026-12-20", 4)
	store.Location = "store-1"
	s := stock.SKU{SKU: "Q", Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "2027-01-01", 4), store}}
	locs := []stock.Location{
		{ID: "default", Kind: stock.LocationWarehouse, Ships: true, Enabled: true},
		{ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true},
	}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		// o0 takes S1's 4, o1 L1's 4 and waits for 3 more; o0's release leaves S1 4.
		apply(t, inv, stock.AllocateRequest{OpID: "a0", SKU: "Q", Qty: 4, TargetDate: "2026-12-01", Mode: stock.ModeReserve, Holder: "o0"})
		apply(t, inv, backorder("b1", "o1", "l1", 7, "2026-12-01", stock.ModeReserve, 0))
		apply(t, inv, stock.ReleaseRequest{OpID: "r0", SKU: "Q", From: stock.Reserved, Holder: "o0", Lots: lotQty("S1", 4)})

		_, err := inv.Apply(ctx, stock.ChangeRequest{OpID: "c1", SKU: "Q", TargetDate: "2026-12-01", Mode: stock.ModeReserve,
			Release: lotQty("L1", 1), Allocate: []int64{3}, Holder: "o1"})
		wantQueuedRefusal(t, err, "requested=3 available=2 queued=3")
		_, err = inv.Apply(ctx, stock.MoveAllocationRequest{OpID: "m1", SKU: "Q", TargetDate: "2026-12-01", Mode: stock.ModeReserve,
			Release: lotQty("L1", 4), To: "store-1", Holder: "o1"})
		wantQueuedRefusal(t, err, "requested=4 available=1 queued=3")
		pinned := alloc("a1", "Q", 2, "2026-12-01", stock.ModeReserve)
		pinned.Route = &stock.Route{Pinned: "store-1", Locations: locs}
		_, err = inv.Apply(ctx, pinned)
		wantQueuedRefusal(t, err, "requested=2 available=1 queued=3")

		pinned.OpID, pinned.Qty = "a2", 1
		r, err := inv.Apply(ctx, pinned)
		wantMoves(t, r, err, mv{"S1", stock.Sellable, stock.Reserved, 1})
		wantStrings(t, "queue", queueOf(t, inv), "o1/l1:3")
	})
}

func wantQueuedRefusal(t *testing.T, err error, detail string) {
	t.Helper()
	wantErr(t, err, stock.ErrShortage)
	if !strings.Contains(err.Error(), detail) {
		t.Fatalf("refusal %v, want %q", err, detail)
	}
}
