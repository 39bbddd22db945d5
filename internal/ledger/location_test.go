package ledger

import (
	"strings"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

// A lot registered at a location keeps it: in the result, in the snapshot and in every
// later result that touches it; a lot registered without one, or with the default's id,
// is at the default location and says none. An operation that names a location checks
// the lot is stored there (ErrLocation, nothing moved) and one that names none does not.
func TestLotsKeepTheirLocation(t *testing.T) {
	s := stock.SKU{SKU: "A", Lots: []stock.Lot{
		lot("old", stock.KindOnHand, 0, "2027-01-01", 5),
		func() stock.Lot {
			l := lot("s1", stock.KindOnHand, 1, "2027-02-01", 5)
			l.Location = "store-1"
			return l
		}(),
	}}
	each(t, []stock.SKU{s}, func(t *testing.T, inv Inventory) {
		r, err := inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r1", SKU: "A", Lot: stock.NewLot{LotID: "w2", Kind: stock.KindPlanned, Good: true, Sellable: 3, Location: "wh-2"}})
		wantMoves(t, r, err, mv{"w2", stock.External, stock.Sellable, 3})
		if r.Lots[0].Location != "wh-2" {
			t.Fatalf("registered lot %+v", r.Lots[0])
		}
		r, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1, Location: stock.DefaultLocation}})
		wantMoves(t, r, err, mv{"d", stock.External, stock.Sellable, 1})
		if r.Lots[0].Location != "" {
			t.Fatalf("a lot at the default location says %q", r.Lots[0].Location)
		}
		// Registered with the default's id or without one: the same request.
		r, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1}})
		if err != nil || !r.Replayed {
			t.Fatalf("replay without the default's id: %+v %v", r, err)
		}
		_, err = inv.Apply(ctx, stock.RegisterLotRequest{OpID: "r2", SKU: "A", Lot: stock.NewLot{LotID: "d", Kind: stock.KindOnHand, Good: true, Sellable: 1, Location: "wh-2"}})
		wantErr(t, err, stock.ErrOpConflict)

		_, err = inv.Apply(ctx, stock.HoldRequest{OpID: "h1", SKU: "A", LotID: "s1", Qty: 1, Reason: "count", Location: "wh-2"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.AdjustRequest{OpID: "a1", SKU: "A", LotID: "old", Delta: 1, Reason: "count", Location: "store-1"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "v1", SKU: "A", LotID: "w2", Location: stock.DefaultLocation})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.RecallRequest{OpID: "c1", SKU: "A", LotID: "w2", Reason: "recall", Location: "store-1"})
		wantErr(t, err, stock.ErrLocation)
		_, err = inv.Apply(ctx, stock.DamageRequest{OpID: "x1", SKU: "A", LotID: "nope", Qty: 1, Reason: "r", Location: "store-1"})
		wantErr(t, err, stock.ErrUnknownLot)

		r, err = inv.Apply(ctx, stock.HoldRequest{OpID: "h2", SKU: "A", LotID: "s1", Qty: 1, Reason: "count", Location: "store-1"})
		wantMoves(t, r, err, mv{"s1", stock.Sellable, stock.Hidden, 1})
		r, err = inv.Apply(ctx, stock.AdjustRequest{OpID: "a2", SKU: "A", LotID: "old", Delta: 1, Reason: "count", Location: stock.DefaultLocation})
		wantMoves(t, r, err, mv{"old", stock.External, stock.Sellable, 1})
		r, err = inv.Apply(ctx, stock.ReceiveRequest{OpID: "v2", SKU: "A", LotID: "w2", Location: "wh-2"})
		wantMoves(t, r, err)
		if r.Lots[0].Location != "wh-2" || r.Lots[0].Kind != stock.KindOnHand {
			t.Fatalf("received lot %+v", r.Lots[0])
		}
		r, err = inv.Apply(ctx, alloc("o1", "A", 12, "2026-12-01", stock.ModeShip))
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]string{}
		for _, l := range r.Lots {
			at[l.LotID] = l.Location
		}
		if at["old"] != "" || at["s1"] != "store-1" || at["w2"] != "wh-2" {
			t.Fatalf("allocated lots at %v", at)
		}
		snap, err := inv.Snapshot(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range snap.Lots {
			if l.Location != at[l.LotID] && l.LotID != "d" || l.LotID == "d" && l.Location != "" {
				t.Fatalf("snapshot lot %s at %q, results said %q", l.LotID, l.Location, at[l.LotID])
			}
		}
	})
}

// A SKU hash written before locations has no p:<lot> fields: its lots are at the default
// location, and an operation naming the default location finds them there.
func TestLotsWithoutLocationAreAtTheDefault(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(stock.SKU{SKU: "A", Lots: []stock.Lot{lot("L", stock.KindOnHand, 0, "2027-01-01", 5)}})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Snapshot(ctx, "A"); err == nil {
		t.Fatal("loaded before the first operation")
	}
	r, err := l.Apply(ctx, stock.HoldRequest{OpID: "h1", SKU: "A", LotID: "L", Qty: 1, Reason: "count", Location: stock.DefaultLocation})
	wantMoves(t, r, err, mv{"L", stock.Sellable, stock.Hidden, 1})
	fields, err := rc.HKeys(ctx, Key(prefix, "A")).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if strings.HasPrefix(f, "p:") {
			t.Fatalf("a lot at the default location stored %s", f)
		}
	}
	_, err = l.Apply(ctx, stock.HoldRequest{OpID: "h2", SKU: "A", LotID: "L", Qty: 1, Reason: "count", Location: "wh-2"})
	wantErr(t, err, stock.ErrLocation)
}
