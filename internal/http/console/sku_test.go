package console

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// The SKU page shows each lot's location, and the availability in total, for the network
// and per location, marking the locations that count toward the network.
func TestSKUPageShowsLocations(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	for _, q := range []string{`INSERT INTO skus (sku, safety_stock, version) VALUES ('M', 1, 1)`,
		`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable, location) VALUES
  ('M', 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 5, 'default'),
  ('M', 'S1', 'onhand', '2027-01-02', 2, '0001-01-01', '9999-12-31', 3, 'store-1')`} {
		if err := d.db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := ledger.PublishLocations(context.Background(), d.rc, d.prefix, []stock.Location{
		{ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true},
	}, true); err != nil {
		t.Fatal(err)
	}
	ck := tc.signIn(readToken)
	w := tc.do(req{method: "GET", path: "/skus/M?date=2026-12-01", cookie: ck})
	page := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET /skus/M: %d\n%s", w.Code, page)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<td><code>L1</code></td><td class="nw">default</td>`),
		regexp.MustCompile(`<td><code>S1</code></td><td class="nw">store-1</td>`),
		regexp.MustCompile(`<p id="availability"><b>7</b> available to ship`),
		regexp.MustCompile(`<p id="availability-network"><b>4</b> available to the network \(sellable 5 `),
		regexp.MustCompile(`<tr><td>default</td><td class="num">5</td><td class="num">0</td><td class="num">4</td><td>counts</td></tr>`),
		regexp.MustCompile(`<tr><td>store-1</td><td class="num">3</td><td class="num">0</td><td class="num">2</td><td><span class="hint">does not count</span></td></tr>`),
	} {
		if !want.MatchString(page) {
			t.Errorf("no %s in the SKU page", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

// The SKU page shows the units its queue waits for and the waiting lines, the next one
// served first, each linking to its order.
func TestSKUPageShowsTheQueue(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	for _, q := range []string{`INSERT INTO skus (sku, safety_stock, version) VALUES ('W', 0, 1)`,
		`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable) VALUES
  ('W', 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 1)`} {
		if err := d.db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	led, err := ledger.New(ledger.Config{Redis: d.rc, Prefix: d.prefix, Loader: inventorydb.PGLoader{DB: d.db}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i, b := range []stock.BackorderRequest{
		{Holder: "LC-A", Line: "1", Qty: 3},
		{Holder: "LC-B", Line: "2", Qty: 2, Class: 4},
	} {
		b.OpID, b.SKU, b.TargetDate, b.Mode, b.QueuedAt = fmt.Sprint("bo-", i), "W", "2026-12-01", stock.ModeShip, at.Add(time.Duration(i)*time.Minute).UnixMilli()
		if _, err := led.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	ck := tc.signIn(readToken)
	w := tc.do(req{method: "GET", path: "/skus/W", cookie: ck})
	page := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET /skus/W: %d\n%s", w.Code, page)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<p id="waiting"><b>4</b> unit\(s\) waited for by 2 order line\(s\)`),
		regexp.MustCompile(`(?s)<tr><td class="num">1</td><td><a href="/orders/LC-B">LC-B</a></td><td><code>2</code></td><td class="num">2</td><td>ship</td><td class="nw">2026-12-01</td><td class="nw">2026-12-01 09:01:00.000</td><td class="num">4</td></tr>` +
			`.*<tr><td class="num">2</td><td><a href="/orders/LC-A">LC-A</a></td><td><code>1</code></td><td class="num">2</td>`),
	} {
		if !want.MatchString(page) {
			t.Errorf("no %s in the SKU page", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}
