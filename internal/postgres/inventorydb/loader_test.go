package inventorydb

import (
	"errors"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/testenv"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

func TestPGLoader(t *testing.T) {
	db := testenv.Postgres(t)
	for _, q := range []string{
		`INSERT INTO skus (sku, safety_stock, version) VALUES ('A', 3, 7), ('EMPTY', 0, 0)`,
		`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
		                   sellable, reserved, allocated, hidden, shipped, defective) VALUES
		 ('A', 'L2', 'planned', true, NULL, 2, '2026-12-24', '2026-12-01', '2027-06-30', 10, 1, 0, 0, 0, 0),
		 ('A', 'L1', 'onhand', false, '2027-01-31', 1, NULL, '0001-01-01', '9999-12-31', 5, 0, 2, 1, 4, 6)`,
	} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	got, err := PGLoader{DB: db}.LoadSKU(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	want := stock.SKU{SKU: "A", SafetyStock: 3, Version: 7, Lots: []stock.Lot{
		{LotID: "L1", Kind: stock.KindOnHand, Good: false, BestBefore: "2027-01-31", RegSeq: 1, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate,
			Sellable: 5, Allocated: 2, Hidden: 1, Shipped: 4, Defective: 6},
		{LotID: "L2", Kind: stock.KindPlanned, Good: true, RegSeq: 2, ArrivesAt: "2026-12-24", ValidFrom: "2026-12-01", ValidTo: "2027-06-30",
			Sellable: 10, Reserved: 1},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if s, err := (PGLoader{DB: db}).LoadSKU(ctx, "EMPTY"); err != nil || len(s.Lots) != 0 {
		t.Fatalf("empty sku: %+v %v", s, err)
	}
	if _, err := (PGLoader{DB: db}).LoadSKU(ctx, "B"); !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("unknown sku: %v", err)
	}

	// The ledger loads through it on first touch, and Redis then holds what PostgreSQL had.
	rc, prefix := testenv.Redis(t)
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Apply(ctx, alloc("o1", "A", 2, "2026-12-01", stock.ModeReserve))
	if err != nil || len(r.Moves) != 1 || r.Moves[0].LotID != "L2" || r.Moves[0].From != stock.Sellable || r.Moves[0].To != stock.Reserved || r.Moves[0].Qty != 2 {
		t.Fatalf("allocation through the loader: %+v %v", r.Moves, err)
	}
	snap, err := l.Snapshot(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	want.Version, want.Lots[1].Sellable, want.Lots[1].Reserved = 8, 8, 3
	if !reflect.DeepEqual(snap, want) {
		t.Fatalf("snapshot\n%+v\nwant\n%+v", snap, want)
	}
	_, err = l.Apply(ctx, alloc("o2", "B", 1, "2026-12-01", stock.ModeReserve))
	if !errors.Is(err, stock.ErrUnknownSKU) {
		t.Fatalf("unknown SKU: %v", err)
	}
}
