package orderdb_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/orderdb"
	"github.com/junban/junban/internal/testenv"
)

// PGLoader reads an order's row as persist wrote it: every field of the snapshot, its
// result seq, and its hold at microsecond precision; an lcid without a row is not found,
// and a row whose lines are not a list is an error, not an order without lines.
func TestPGLoaderReadsAnOrdersRow(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	hold := time.Date(2026, 12, 3, 18, 0, 0, 123456789, time.UTC)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO orders (lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id, hold_until)
		  VALUES ('LC-HELD', 'placed', 'reserved', false, 'reserve', '2026-12-01',
		  '[{"line_id":"1","sku":"S","qty":2,"lots":[{"lot_id":"L1","qty":2}]}]', 4, 'e4', ?)`, []any{hold}},
		{`INSERT INTO orders (lcid, status, paid, lines, seq, last_event_id)
		  VALUES ('LC-BARE', 'rejected', true, '[]', 1, 'e1')`, nil},
		{`INSERT INTO orders (lcid, status, lines, seq, last_event_id) VALUES ('LC-BAD', 'placed', '{}', 1, 'e1')`, nil},
	} {
		if err := db.Exec(q.sql, q.args...).Error; err != nil {
			t.Fatal(err)
		}
	}
	l := orderdb.PGLoader{DB: db}

	o, seq, found, err := l.LoadOrder(ctx, "LC-HELD")
	if err != nil || !found || seq != 4 {
		t.Fatalf("LC-HELD: found %v, seq %d, %v; want found, seq 4", found, seq, err)
	}
	h := hold.Truncate(time.Microsecond)
	want := &event.OrderSnapshot{LCID: "LC-HELD", Status: "placed", Allocation: "reserved", Mode: "reserve", TargetDate: "2026-12-01",
		Lines:     []event.SnapshotLine{{LineID: "1", SKU: "S", Qty: 2, Lots: []event.LotQty{{LotID: "L1", Qty: 2}}}},
		HoldUntil: &h}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("LC-HELD loaded\n%+v\nwant\n%+v", o, want)
	}

	o, seq, found, err = l.LoadOrder(ctx, "LC-BARE")
	if err != nil || !found || seq != 1 {
		t.Fatalf("LC-BARE: found %v, seq %d, %v; want found, seq 1", found, seq, err)
	}
	if want := (&event.OrderSnapshot{LCID: "LC-BARE", Status: "rejected", Paid: true, Lines: []event.SnapshotLine{}}); !reflect.DeepEqual(o, want) {
		t.Errorf("LC-BARE loaded\n%+v\nwant\n%+v", o, want)
	}

	if o, _, found, err := l.LoadOrder(ctx, "LC-NONE"); err != nil || found || o != nil {
		t.Errorf("LC-NONE: %+v, found %v, %v; want not found, no error", o, found, err)
	}
	if _, _, found, err := l.LoadOrder(ctx, "LC-BAD"); err == nil || found {
		t.Errorf("LC-BAD (lines an object): found %v, %v; want an error", found, err)
	}
}
