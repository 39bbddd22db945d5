package api

import (
	"fmt"
	"testing"

	"github.com/junban/junban/internal/ledger/stock"
)

// backorder queues holder's line at sku for qty through the ledger, beyond what the
// SKU has, and fails the test unless it waits.
func (e *env) backorder(sku, holder, line string, qty int64, class int, at int64) {
	e.t.Helper()
	res, err := e.api.d.Ledger.Apply(ctx, stock.BackorderRequest{OpID: "bo-" + holder + "-" + line, SKU: sku, Holder: holder, Line: line,
		Qty: qty, TargetDate: "2026-12-01", Mode: stock.ModeShip, Class: class, QueuedAt: at})
	if err != nil || res.Queued == 0 {
		e.t.Fatalf("backorder %s/%s: %+v %v", holder, line, res, err)
	}
}

// The queue: its lines in serving order (class first, then queued order) with the
// whole queue's totals on every page; a SKU not loaded answers from PostgreSQL; an
// unknown one is a 404.
func TestQueue(t *testing.T) {
	e := newEnv(t)
	e.seedSKU(stock.SKU{SKU: "Q", Lots: []stock.Lot{onhand("L1", 1, "2027-01-01", 2)}})
	code, body := e.do("GET", "/v1/skus/Q/queue", readToken, nil)
	var v QueueView
	decode(t, body, &v)
	if code != 200 || v.Source != "postgres" || v.Lines != 0 || len(v.Entries) != 0 {
		t.Fatalf("not loaded: %d %s", code, body)
	}
	e.backorder("Q", "LC-1", "1", 5, 0, 1_800_000_000_000) // takes the 2 units, waits for 3
	e.backorder("Q", "LC-2", "1", 4, 0, 1_800_000_001_000)
	e.backorder("Q", "LC-3", "2", 1, 7, 1_800_000_002_000)
	want := []string{"LC-3/2 1 class 7", "LC-1/1 3 class 0", "LC-2/1 4 class 0"}
	var got []string
	cursor := ""
	for page := 0; page < 4 && (page == 0 || cursor != ""); page++ {
		path := "/v1/skus/Q/queue?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, body = e.do("GET", path, readToken, nil)
		v = QueueView{}
		decode(t, body, &v)
		if code != 200 || v.Source != "redis" || v.Lines != 3 || v.Waiting != 8 {
			t.Fatalf("page %d: %d %s", page, code, body)
		}
		for _, l := range v.Entries {
			got = append(got, fmt.Sprintf("%s/%s %d class %d", l.Holder, l.Line, l.Want, l.Class))
			if l.Position != len(got) || l.QueuedAt.UnixMilli() != l.QueuedAtMs {
				t.Fatalf("page %d: %s", page, body)
			}
		}
		cursor = v.NextCursor
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	for path, want := range map[string]int{
		"/v1/skus/NOPE/queue":         404,
		"/v1/skus/Q/queue?limit=0":    400,
		"/v1/skus/Q/queue?cursor=%21": 400,
		"/v1/skus/Q/queue?colour=red": 400,
		"/v1/skus/%7Bx%7D/queue":      400,
	} {
		if code, body := e.do("GET", path, readToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
	if code, _ := e.do("GET", "/v1/skus/Q/queue", "", nil); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
}
