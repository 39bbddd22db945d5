package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/ledger/stock"
)

// queue prints the SKU's waiting lines, the next one served first, and the units they
// wait for; --json is the API's document with every line.
func TestQueue(t *testing.T) {
	d := readerEnv(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.DB.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES ('QU-1', 0, 1)`).Error)
	must(d.DB.Exec(`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable) VALUES
  ('QU-1', 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 1)`).Error)
	var out bytes.Buffer
	must(ctl(ctx, &out, "queue", []string{"QU-1"}))
	if s := out.String(); !strings.Contains(s, "from postgres") || !strings.Contains(s, "waiting:  0 units, 0 lines") {
		t.Fatalf("queue before load:\n%s", s)
	}
	for _, b := range []stock.BackorderRequest{
		{OpID: "bo-1", Holder: "LC-OLD", Line: "1", Qty: 3, Class: 0, QueuedAt: 1_796_115_600_000},
		{OpID: "bo-2", Holder: "LC-VIP", Line: "2", Qty: 2, Class: 5, QueuedAt: 1_796_115_660_000},
	} {
		b.SKU, b.TargetDate, b.Mode = "QU-1", "2026-12-01", stock.ModeShip
		_, err := d.Ledger.Apply(ctx, b)
		must(err)
	}
	out.Reset()
	must(ctl(ctx, &out, "queue", []string{"QU-1"}))
	s := out.String()
	vip, old := strings.Index(s, "LC-VIP"), strings.Index(s, "LC-OLD")
	if !strings.Contains(s, "waiting:  4 units, 2 lines") || vip < 0 || old < vip || !strings.Contains(s, "2026-12-01T09:00:00Z") {
		t.Fatalf("queue:\n%s", s)
	}
	var v api.QueueView
	if err := decode(t, &v, "queue", "QU-1"); err != nil {
		t.Fatal(err)
	}
	if v.Source != "redis" || v.Waiting != 4 || len(v.Entries) != 2 || v.Entries[0].Holder != "LC-VIP" || v.Entries[1].Want != 2 {
		t.Fatalf("queue --json: %+v", v)
	}
	for _, args := range [][]string{{}, {"a", "b"}, {"NOPE"}} {
		if err := ctl(ctx, &out, "queue", args); err == nil {
			t.Errorf("queue %q: no error", args)
		}
	}
}
