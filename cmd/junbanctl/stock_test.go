package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// readerEnv points junbanctl at the test's Redis prefix and PostgreSQL schema.
func readerEnv(t *testing.T) api.Deps {
	rc, prefix := testenv.Redis(t)
	url := testenv.PostgresURL(t)
	t.Setenv("REDIS_URL", testenv.RedisURL(t))
	t.Setenv("JUNBAN_KEY_PREFIX", prefix)
	t.Setenv("DATABASE_URL", url)
	d, closeDeps, err := readerDeps()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDeps)
	d.Redis = rc
	return d
}

// stock prints the lots and the availability the API answers: --json is the same
// document, the table shows the allocation order and the verdict.
func TestStock(t *testing.T) {
	d := readerEnv(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.DB.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES ('ST-1', 2, 1)`).Error)
	must(d.DB.Exec(`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable) VALUES
  ('ST-1', 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 5),
  ('ST-1', 'L2', 'onhand', '2026-12-20', 2, '0001-01-01', '9999-12-31', 3)`).Error)
	var out bytes.Buffer
	must(ctl(ctx, &out, "stock", []string{"ST-1"}))
	if s := out.String(); !strings.Contains(s, "from postgres") || !strings.Contains(s, "L2") {
		t.Fatalf("stock before load:\n%s", s)
	}
	out.Reset()
	must(ctl(ctx, &out, "stock", []string{"--date", "2026-12-01", "--qty", "7", "ST-1"}))
	if s := out.String(); !strings.Contains(s, "availability on 2026-12-01, ship: 6") || !strings.Contains(s, "would fail: ERR_SAFETY_STOCK") {
		t.Fatalf("stock --qty 7:\n%s", s)
	}
	out.Reset()
	must(ctl(ctx, &out, "stock", []string{"--date", "2026-12-01", "--mode", "reserve", "--qty", "4", "--json", "ST-1"}))
	var doc struct {
		SKU          api.SKUView          `json:"sku"`
		Availability *ledger.Availability `json:"availability"`
	}
	must(json.Unmarshal(out.Bytes(), &doc))
	want, err := d.Ledger.Availability(ctx, ledger.AvailabilityRequest{SKU: "ST-1", TargetDate: "2026-12-01", Mode: stock.ModeReserve, Qty: 4})
	must(err)
	if !reflect.DeepEqual(*doc.Availability, want) || doc.SKU.Source != "redis" || want.Take[0].LotID != "L2" {
		t.Fatalf("stock --json: %+v, want %+v", doc.Availability, want)
	}
	for _, args := range [][]string{{}, {"a", "b"}, {"--qty", "3", "ST-1"}, {"--date", "2026-12-01", "--qty", "-1", "ST-1"}} {
		if err := ctl(ctx, &out, "stock", args); err == nil {
			t.Errorf("stock %q: no error", args)
		}
	}
	if err := ctl(ctx, &out, "stock", []string{"NOPE"}); err == nil {
		t.Error("stock of an unknown SKU: no error")
	}
	// A backorder of 10 takes the 8 there are and waits for 2: stock says so.
	r, err := d.Ledger.Apply(ctx, stock.BackorderRequest{OpID: "bo", SKU: "ST-1", Holder: "o1", Line: "1", Qty: 10, TargetDate: "2026-12-01", Mode: stock.ModeReserve})
	if err != nil || r.Queued != 2 {
		t.Fatalf("backorder: %+v %v", r, err)
	}
	out.Reset()
	must(ctl(ctx, &out, "stock", []string{"--date", "2026-12-01", "ST-1"}))
	if s := out.String(); !strings.Contains(s, "availability on 2026-12-01, ship: 0 (sellable 0 less safety stock 2 less 2 waiting for stock)") {
		t.Fatalf("stock with a waiting line:\n%s", s)
	}
}

// stock of a SKU with lots at two locations prints each lot's location, and with --date
// the answer per location.
func TestStockPerLocation(t *testing.T) {
	d := readerEnv(t)
	ctx := context.Background()
	for _, q := range []string{`INSERT INTO skus (sku, safety_stock, version) VALUES ('SL-1', 1, 1)`,
		`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable, location) VALUES
  ('SL-1', 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 5, 'default'),
  ('SL-1', 'S1', 'onhand', '2026-12-20', 2, '0001-01-01', '9999-12-31', 3, 'store-1')`} {
		if err := d.DB.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := ctl(ctx, &out, "stock", []string{"--date", "2026-12-01", "--qty", "3", "SL-1"}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^LOT\s+LOCATION\s+KIND\s`),
		regexp.MustCompile(`(?m)^L1\s+default\s+onhand\s`),
		regexp.MustCompile(`(?m)^S1\s+store-1\s+onhand\s`),
		regexp.MustCompile(`(?m)^availability on 2026-12-01, ship: 7 `),
		regexp.MustCompile(`(?m)^default\s+5\s+0\s+4\s+true\s+true$`),
		regexp.MustCompile(`(?m)^store-1\s+3\s+0\s+2\s+false\s+false$`),
		regexp.MustCompile(`(?m)^network \(the locations that are enabled and ship\): 4 available \(sellable 5\)$`),
		// The total takes the earlier-expiring S1; an order over the network, L1 alone.
		regexp.MustCompile(`(?m)^an order of 3 without routing fields would succeed there \(by rank\), taking L1 3$`),
	} {
		if !want.MatchString(s) {
			t.Fatalf("stock per location: no %s in\n%s", want, s)
		}
	}
}

// order prints the document of GET /v1/orders/{lcid}: --json is that document.
func TestOrderInfo(t *testing.T) {
	d := readerEnv(t)
	ctx := context.Background()
	st := domain.State{Seq: 2, Order: &event.OrderSnapshot{LCID: "LC-9", Status: "placed", Paid: true, Mode: stock.ModeShip,
		TargetDate: "2026-12-05", Lines: []event.SnapshotLine{{LineID: "1", SKU: "S", Qty: 2, Lots: []stock.LotQty{{LotID: "L", Qty: 2}}}}}}
	raw, _ := json.Marshal(st)
	if err := d.Redis.Set(ctx, order.StateKey(d.Prefix, "LC-9"), raw, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"order.placed", "payment.confirmed"} {
		if err := d.DB.Exec(`INSERT INTO inbox (event_id, entity, seq, type, outcome, processed_at) VALUES (?, 'LC-9', ?, ?, 'applied', now())`,
			"e"+typ, i+1, typ).Error; err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := ctl(ctx, &out, "order", []string{"LC-9"}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "status:   placed") || !strings.Contains(s, "payment.confirmed") || !strings.Contains(s, "L x2") {
		t.Fatalf("order:\n%s", s)
	}
	out.Reset()
	if err := ctl(ctx, &out, "order", []string{"--json", "LC-9"}); err != nil {
		t.Fatal(err)
	}
	var got api.OrderView
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want, err := d.ReadOrder(ctx, "LC-9", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) || len(got.Timeline) != 2 {
		t.Fatalf("order --json:\n%s\nwant\n%s", gotJSON, wantJSON)
	}
	if err := ctl(ctx, &out, "order", []string{"LC-NONE"}); err == nil || !strings.Contains(err.Error(), "no order LC-NONE") {
		t.Fatalf("unknown order: %v", err)
	}
}
