package api

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
)

// GET /v1/holds lists the placed orders with a hold, soonest first, those due before
// due_before when it is given, and tells when a page leaves some out; an expired order
// is listed by GET /v1/orders?status=expired and carries no hold. Every answer is checked
// against the OpenAPI document.
func TestListHolds(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { h := base.Add(time.Duration(m) * time.Minute); return &h }
	orders := []struct {
		lcid, status string
		hold         *time.Time
	}{
		{"LC-H3", event.StatusPlaced, at(30)},
		{"LC-H1", event.StatusPlaced, at(10)},
		{"LC-H2", event.StatusPlaced, at(20)},
		{"LC-NOHOLD", event.StatusPlaced, nil},
		{"LC-EXP", event.StatusExpired, nil},
		{"LC-CXL", event.StatusCancelled, nil},
	}
	var rs []event.Result
	for _, o := range orders {
		rs = append(rs, event.Result{EventID: "e-" + o.lcid, Entity: o.lcid, LCID: o.lcid, Seq: 1, Type: event.OrderPlaced,
			Outcome: event.Applied, ProcessedAt: base, Order: &event.OrderSnapshot{LCID: o.lcid, Status: o.status,
				Mode: stock.ModeReserve, Lines: []event.SnapshotLine{{LineID: "1", SKU: "S", Qty: 1}}, HoldUntil: o.hold}})
	}
	if _, err := persist.Apply(context.Background(), e.db, rs); err != nil {
		t.Fatal(err)
	}
	list := func(path string) HoldList {
		t.Helper()
		code, body := e.do("GET", path, readToken, nil)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var l HoldList
		decode(t, body, &l)
		return l
	}
	lcids := func(os []OrderRow) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.LCID)
		}
		return out
	}
	l := list("/v1/holds")
	if got, want := lcids(l.Holds), []string{"LC-H1", "LC-H2", "LC-H3"}; !slices.Equal(got, want) || l.More {
		t.Errorf("holds %q (more %v), want %q", got, l.More, want)
	}
	if h := l.Holds[0].HoldUntil; h == nil || !h.Equal(*at(10)) {
		t.Errorf("LC-H1's hold_until %v, want %v", h, at(10))
	}
	l = list("/v1/holds?due_before=" + at(25).Format(time.RFC3339) + "&limit=1")
	if got, want := lcids(l.Holds), []string{"LC-H1"}; !slices.Equal(got, want) || !l.More {
		t.Errorf("due before +25m, limit 1: %q (more %v), want %q and more", got, l.More, want)
	}
	l = list("/v1/holds?due_before=" + base.Format(time.RFC3339))
	if len(l.Holds) != 0 || l.More {
		t.Errorf("nothing due before the first hold: %+v", l)
	}
	for _, bad := range []string{"due_before=tomorrow", "due_before=2026-12-03", "limit=0", "cursor=x", "status=placed"} {
		if code, body := e.do("GET", "/v1/holds?"+bad, readToken, nil); code != 400 {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if code, _ := e.do("GET", "/v1/holds", "", nil); code != 401 {
		t.Errorf("without a token: %d", code)
	}
	code, body := e.do("GET", "/v1/orders?status=expired", readToken, nil)
	var ol OrderList
	decode(t, body, &ol)
	if got := lcids(ol.Orders); code != 200 || !slices.Equal(got, []string{"LC-EXP"}) || ol.Orders[0].HoldUntil != nil {
		t.Errorf("expired orders: %d %s", code, body)
	}
}
