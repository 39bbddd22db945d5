package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// transferSKU has three on-hand lots at wh-1 (one recalled), one at the default location
// and a planned one at wh-1.
func transferSKU() stock.SKU {
	at := func(l stock.Lot, loc string) stock.Lot { l.Location = loc; return l }
	bad := at(lot("bad", stock.KindOnHand, 4, "2026-12-01", 9), "wh-1")
	bad.Good = false
	late := at(lot("late", stock.KindOnHand, 1, "2027-06-01", 5), "wh-1")
	late.ValidFrom, late.ValidTo = "2026-01-01", "2027-05-31"
	return stock.SKU{SKU: "T", Lots: []stock.Lot{
		lot("home", stock.KindOnHand, 0, "2027-01-01", 4),
		late,
		at(lot("early", stock.KindOnHand, 2, "2027-02-01", 3), "wh-1"),
		at(lot("po", stock.KindPlanned, 3, "", 50), "wh-1"),
		bad,
	}}
}

func lotOf(t *testing.T, inv Inventory, sku, id string) stock.Lot {
	t.Helper()
	s, err := inv.Snapshot(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range s.Lots {
		if l.LotID == id {
			return l
		}
	}
	t.Fatalf("no lot %s in %+v", id, s.Lots)
	return stock.Lot{}
}

// A transfer takes the source's good on-hand lots earliest expiry first into planned
// transit lots at the destination (best-before, period and arrival carried), which an
// allocation takes as it takes planned lots; its receipt makes them on hand with the
// shortfall in defective; a cancel puts the units back where they were.
func TestTransfer(t *testing.T) {
	each(t, []stock.SKU{transferSKU()}, func(t *testing.T, inv Inventory) {
		req := stock.TransferRequest{OpID: "t1", SKU: "T", TransferID: "TR1", From: "wh-1", To: stock.DefaultLocation, Qty: 6, ArrivesAt: "2026-12-20"}
		_, err := inv.Apply(ctx, stock.TransferRequest{OpID: "t0", SKU: "T", TransferID: "TR0", From: "wh-1", To: "store", Qty: 9, ArrivesAt: "2026-12-20"})
		wantErr(t, err, stock.ErrShortage) // 8 good on hand at wh-1: the planned and recalled lots do not count
		r, err := inv.Apply(ctx, req)
		wantMoves(t, r, err,
			mv{"early", stock.Sellable, stock.Transit, 3}, mv{"TR1~early", stock.Transit, stock.Sellable, 3},
			mv{"late", stock.Sellable, stock.Transit, 3}, mv{"TR1~late", stock.Transit, stock.Sellable, 3})
		tl := r.Lots[3]
		if tl.LotID != "TR1~late" || tl.Kind != stock.KindPlanned || tl.BestBefore != "2027-06-01" || tl.ArrivesAt != "2026-12-20" ||
			tl.ValidTo != "2027-05-31" || tl.Location != "" || tl.RegSeq != 6 || r.Lots[1].RegSeq != 5 {
			t.Fatalf("transit lots %+v", r.Lots)
		}
		if again, err := inv.Apply(ctx, req); err != nil || !again.Replayed {
			t.Fatalf("replay %+v %v", again, err)
		}
		_, err = inv.Apply(ctx, stock.TransferRequest{OpID: "t2", SKU: "T", TransferID: "TR1", From: "wh-1", To: "store", Qty: 1, ArrivesAt: "2026-12-20"})
		wantErr(t, err, stock.ErrTransferExists)

		// The destination promises transit units as it promises planned lots.
		r, err = inv.Apply(ctx, stock.AllocateRequest{OpID: "a1", SKU: "T", Qty: 60, TargetDate: "2026-12-22", Mode: stock.ModeReserve})
		if err != nil {
			t.Fatal(err)
		}
		_, err = inv.Apply(ctx, stock.TransferCancelRequest{OpID: "c1", SKU: "T", TransferID: "TR1"})
		wantErr(t, err, stock.ErrTransferPromised)
		_, err = inv.Apply(ctx, stock.TransferReceiveRequest{OpID: "v1", SKU: "T", TransferID: "TR1", Qty: 7})
		wantErr(t, err, stock.ErrTransferState) // more than sent
		_, err = inv.Apply(ctx, stock.TransferReceiveRequest{OpID: "v2", SKU: "T", TransferID: "TR1", Qty: 1})
		wantErr(t, err, stock.ErrInsufficient) // 5 short, 4 unpromised
		held := r.Moves
		var back []stock.LotQty
		for _, m := range held {
			back = append(back, stock.LotQty{LotID: m.LotID, Qty: m.Qty})
		}
		if _, err := inv.Apply(ctx, stock.ReleaseRequest{OpID: "a1-rel", SKU: "T", From: stock.Reserved, Lots: back}); err != nil {
			t.Fatal(err)
		}
		r, err = inv.Apply(ctx, stock.TransferReceiveRequest{OpID: "v3", SKU: "T", TransferID: "TR1", Qty: 4})
		wantMoves(t, r, err, mv{"TR1~late", stock.Sellable, stock.Defective, 2})
		if l := lotOf(t, inv, "T", "TR1~late"); l.Kind != stock.KindOnHand || l.Sellable != 1 || l.Defective != 2 {
			t.Fatalf("received %+v", l)
		}
		_, err = inv.Apply(ctx, stock.TransferReceiveRequest{OpID: "v4", SKU: "T", TransferID: "TR1", Qty: 4})
		wantErr(t, err, stock.ErrTransferState)
		_, err = inv.Apply(ctx, stock.TransferCancelRequest{OpID: "c2", SKU: "T", TransferID: "TR1"})
		wantErr(t, err, stock.ErrTransferState)
		_, err = inv.Apply(ctx, stock.TransferCancelRequest{OpID: "c3", SKU: "T", TransferID: "nope"})
		wantErr(t, err, stock.ErrUnknownTransfer)

		// A received transit lot is on hand at its destination: it may leave again.
		r, err = inv.Apply(ctx, stock.TransferRequest{OpID: "t3", SKU: "T", TransferID: "TR2", From: stock.DefaultLocation, To: "wh-1", Qty: 6, ArrivesAt: "2027-01-05"})
		wantMoves(t, r, err,
			mv{"home", stock.Sellable, stock.Transit, 4}, mv{"TR2~home", stock.Transit, stock.Sellable, 4},
			mv{"TR1~early", stock.Sellable, stock.Transit, 2}, mv{"TR2~TR1~early", stock.Transit, stock.Sellable, 2})
		if r.Lots[1].Location != "wh-1" {
			t.Fatalf("transit lot %+v", r.Lots[1])
		}
		before := lotOf(t, inv, "T", "home")
		r, err = inv.Apply(ctx, stock.TransferCancelRequest{OpID: "c4", SKU: "T", TransferID: "TR2"})
		wantMoves(t, r, err,
			mv{"TR2~home", stock.Sellable, stock.Transit, 4}, mv{"home", stock.Transit, stock.Sellable, 4},
			mv{"TR2~TR1~early", stock.Sellable, stock.Transit, 2}, mv{"TR1~early", stock.Transit, stock.Sellable, 2})
		if after := lotOf(t, inv, "T", "home"); after.Sellable != before.Sellable+4 {
			t.Fatalf("home %+v after the cancel", after)
		}
		if l := lotOf(t, inv, "T", "TR2~home"); l.Sellable+l.Reserved+l.Allocated != 0 {
			t.Fatalf("cancelled transit lot %+v", l)
		}
		// An allocation valid at the time takes what came back, not the emptied transit lots.
		r, err = inv.Apply(ctx, stock.AllocateRequest{OpID: "a2", SKU: "T", Qty: 4, TargetDate: "2026-12-22", Mode: stock.ModeShip})
		wantMoves(t, r, err, mv{"home", stock.Sellable, stock.Allocated, 4})
	})
}

// Transfer ids and locations are checked before any script runs.
func TestTransferValidation(t *testing.T) {
	ok := stock.TransferRequest{OpID: "o", SKU: "S", TransferID: "T", From: "a", To: "b", Qty: 1, ArrivesAt: "2026-12-01"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(*stock.TransferRequest){
		"same":     func(r *stock.TransferRequest) { r.To = r.From },
		"mark":     func(r *stock.TransferRequest) { r.TransferID = "T~1" },
		"from":     func(r *stock.TransferRequest) { r.From = "" },
		"to":       func(r *stock.TransferRequest) { r.To = "b/c" },
		"date":     func(r *stock.TransferRequest) { r.ArrivesAt = "2026-02-30" },
		"qty":      func(r *stock.TransferRequest) { r.Qty = 0 },
		"noid":     func(r *stock.TransferRequest) { r.TransferID = "" },
		"overlong": func(r *stock.TransferRequest) { r.Qty = stock.MaxQty + 1 },
	} {
		r := ok
		f(&r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: %+v valid", name, r)
		}
	}
	if err := (stock.TransferReceiveRequest{OpID: "o", SKU: "S", TransferID: "T"}).Validate(); err == nil {
		t.Error("receipt without a count valid")
	}
	if err := (stock.TransferCancelRequest{OpID: "o", SKU: "S", TransferID: "a~b"}).Validate(); err == nil {
		t.Error("cancel of a transfer id with ~ valid")
	}
	if id := stock.TransitLotID(stringOf('x', 150), stringOf('y', 60)); len(id) != 41 || id[0] != '~' {
		t.Errorf("long transit lot id %q", id)
	}
	if stock.TransitLotID("T", "L") != "T~L" {
		t.Error("short transit lot id")
	}
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// Over a random sequence of transfers, receipts, cancels, allocations and releases, every
// step keeps the counts: per location, its buckets change by its lots' moves; over the
// SKU, by nothing (no step here moves to or from external); units in transit are in
// their transit lots only, which are on hand nowhere until received.
func TestTransfersCountUnitsOnce(t *testing.T) {
	each(t, []stock.SKU{transferSKU()}, func(t *testing.T, inv Inventory) {
		rng := rand.New(rand.NewPCG(7, 11))
		locs := []string{stock.DefaultLocation, "wh-1", "store"}
		prev, err := inv.Snapshot(ctx, "T")
		if errors.Is(err, stock.ErrNotLoaded) {
			if _, err := inv.Apply(ctx, stock.SafetyStockRequest{OpID: "load", SKU: "T"}); err != nil {
				t.Fatal(err)
			}
			prev, err = inv.Snapshot(ctx, "T")
		}
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		open := map[string]bool{}
		applied := 0
		for i := range 300 {
			op := fmt.Sprintf("s%d", i)
			var req stock.Op
			switch k := rng.IntN(10); {
			case k < 4:
				from, to := locs[rng.IntN(3)], locs[rng.IntN(3)]
				if from == to {
					continue
				}
				id := fmt.Sprintf("TR%d", i)
				ids = append(ids, id)
				req = stock.TransferRequest{OpID: op, SKU: "T", TransferID: id, From: from, To: to, Qty: 1 + rng.Int64N(4), ArrivesAt: "2026-12-20"}
			case k < 6 && len(ids) > 0:
				req = stock.TransferReceiveRequest{OpID: op, SKU: "T", TransferID: ids[rng.IntN(len(ids))], Qty: 1 + rng.Int64N(4)}
			case k < 8 && len(ids) > 0:
				req = stock.TransferCancelRequest{OpID: op, SKU: "T", TransferID: ids[rng.IntN(len(ids))]}
			default:
				req = stock.AllocateRequest{OpID: op, SKU: "T", Qty: 1 + rng.Int64N(3), TargetDate: "2026-12-22", Mode: stock.ModeReserve}
			}
			r, err := inv.Apply(ctx, req)
			if err != nil {
				if _, ok := stock.Rejection(err); !ok {
					t.Fatal(err)
				}
				continue
			}
			applied++
			switch q := req.(type) {
			case stock.TransferRequest:
				open[q.TransferID] = true
			case stock.TransferReceiveRequest:
				delete(open, q.TransferID)
			case stock.TransferCancelRequest:
				delete(open, q.TransferID)
			}
			now, err := inv.Snapshot(ctx, "T")
			if err != nil {
				t.Fatal(err)
			}
			if err := conserved(prev, now, r); err != nil {
				t.Fatalf("step %d %+v: %v", i, req, err)
			}
			var total0, total1 int64
			for _, l := range prev.Lots {
				total0 += l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective
			}
			for _, l := range now.Lots {
				total1 += l.Sellable + l.Reserved + l.Allocated + l.Hidden + l.Shipped + l.Defective
				// A transit lot is on hand only once its transfer was received.
				if id, _, ok := strings.Cut(l.LotID, "~"); ok && open[id] && l.Kind != stock.KindPlanned {
					t.Fatalf("step %d: lot %+v of a transfer in transit is on hand", i, l)
				}
			}
			if total0 != total1 {
				t.Fatalf("step %d %+v: %d units before, %d after", i, req, total0, total1)
			}
			prev = now
		}
		if applied < 30 {
			t.Fatalf("only %d steps applied", applied)
		}
	})
}

// A SKU's transfers load with it (t:<id> fields), as PostgreSQL keeps them after a Redis
// data loss: each result says its transfer as it left it, a snapshot lists them all, a
// store loaded from that snapshot reads the same snapshot back, and there a transfer in
// transit can be received or cancelled, and one received cannot be received again.
func TestTransfersLoadWithTheSKU(t *testing.T) {
	for name, inv := range impls(t, transferSKU()) {
		t.Run(name, func(t *testing.T) {
			r, err := inv.Apply(ctx, stock.TransferRequest{OpID: "t1", SKU: "T", TransferID: "TR1", From: "wh-1", To: stock.DefaultLocation, Qty: 6, ArrivesAt: "2026-12-20"})
			if err != nil {
				t.Fatal(err)
			}
			want := stock.Transfer{TransferID: "TR1", State: stock.TransferInTransit, From: "wh-1", To: stock.DefaultLocation,
				Lots: []stock.TransferLot{{Source: "early", Transit: "TR1~early", Qty: 3}, {Source: "late", Transit: "TR1~late", Qty: 3}}}
			if r.Transfer == nil || !reflect.DeepEqual(*r.Transfer, want) {
				t.Fatalf("the request's transfer %+v", r.Transfer)
			}
			for _, op := range []stock.Op{
				stock.TransferRequest{OpID: "t2", SKU: "T", TransferID: "TR2", From: stock.DefaultLocation, To: "wh-1", Qty: 1, ArrivesAt: "2026-12-20"},
				stock.TransferReceiveRequest{OpID: "t3", SKU: "T", TransferID: "TR2", Qty: 1},
			} {
				if _, err := inv.Apply(ctx, op); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := inv.Snapshot(ctx, "T")
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Transfers) != 2 || !reflect.DeepEqual(snap.Transfers[0], want) || snap.Transfers[1].State != stock.TransferReceived {
				t.Fatalf("snapshot's transfers %+v", snap.Transfers)
			}
			reloaded := freshLike(t, name, snap)
			if err := reloaded.Load(ctx, "T"); err != nil {
				t.Fatal(err)
			}
			if again, err := reloaded.Snapshot(ctx, "T"); err != nil || !reflect.DeepEqual(again, snap) {
				t.Fatalf("reloaded snapshot %+v %v, want %+v", again, err, snap)
			}
			r, err = reloaded.Apply(ctx, stock.TransferReceiveRequest{OpID: "v1", SKU: "T", TransferID: "TR1", Qty: 6})
			if err != nil || r.Transfer == nil || r.Transfer.State != stock.TransferReceived {
				t.Fatalf("receipt after the reload %+v %v", r, err)
			}
			_, err = reloaded.Apply(ctx, stock.TransferReceiveRequest{OpID: "v2", SKU: "T", TransferID: "TR2", Qty: 1})
			wantErr(t, err, stock.ErrTransferState)
			r, err = freshLike(t, name, snap).Apply(ctx, stock.TransferCancelRequest{OpID: "c1", SKU: "T", TransferID: "TR1"})
			wantMoves(t, r, err,
				mv{"TR1~early", stock.Sellable, stock.Transit, 3}, mv{"early", stock.Transit, stock.Sellable, 3},
				mv{"TR1~late", stock.Sellable, stock.Transit, 3}, mv{"late", stock.Transit, stock.Sellable, 3})
		})
	}
}

// freshLike returns an empty store of the kind name (impls) that loads s.
func freshLike(t *testing.T, name string, s stock.SKU) Inventory {
	t.Helper()
	if name == "model" {
		return stock.NewModel(newMemLoader(s))
	}
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
