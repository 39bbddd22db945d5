package console

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/api"
)

// The overview counts the placed orders past their hold_until and tells how long ago the
// oldest was due, in its JSON and its page; a hold not due yet, an expired order and an
// order without a hold do not count; expired orders have their line in the totals.
func TestOverviewShowsDueHolds(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	ck := tc.signIn(readToken)
	now := tc.clock.Now().Add(SampleEveryDefault)
	for _, q := range []struct {
		lcid, status string
		hold         any
	}{
		{"LC-DUE1", "placed", now.Add(-90 * time.Second)},
		{"LC-DUE2", "placed", now.Add(-5 * time.Second)},
		{"LC-LATER", "placed", now.Add(time.Hour)},
		{"LC-NONE", "placed", nil},
		{"LC-EXP", "expired", nil},
	} {
		if err := d.db.Exec(`INSERT INTO orders (lcid, status, hold_until, seq, last_event_id) VALUES (?, ?, ?, 1, 'e')`,
			q.lcid, q.status, q.hold).Error; err != nil {
			t.Fatal(err)
		}
	}
	tc.clock.add(SampleEveryDefault)
	w := tc.do(req{method: "GET", path: "/", cookie: ck})
	page := w.Body.String()
	for _, want := range []string{`id="due-holds">2<`, `id="due-oldest">90.0 s<`, `id="orders-expired">1<`} {
		if w.Code != 200 || !strings.Contains(page, want) {
			t.Fatalf("GET /: %d, no %s:\n%s", w.Code, want, page)
		}
	}
}

// The order page shows a placed order's hold_until, and whether it is due, and the
// status expired as a badge.
func TestOrderPageShowsTheHold(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	now := tc.clock.Now()
	render := func(st *event.OrderSnapshot) string {
		t.Helper()
		w := httptest.NewRecorder()
		tc.c.render(w, httptest.NewRequest("GET", "/orders/LC-1", nil), 200, "order",
			view{Data: orderData{LCID: "LC-1", Order: api.OrderView{LCID: "LC-1", State: st}}})
		return w.Body.String()
	}
	hold := now.Add(30 * time.Minute)
	page := render(&event.OrderSnapshot{LCID: "LC-1", Status: event.StatusPlaced, Mode: event.ModeReserve, HoldUntil: &hold})
	if want := `<td id="order-hold">` + hold.UTC().Format("2006-01-02 15:04:05.000") + ` (in 30m0s)</td>`; !strings.Contains(page, want) {
		t.Errorf("a hold to come: no %s in\n%s", want, page)
	}
	past := now.Add(-2 * time.Second)
	if page := render(&event.OrderSnapshot{LCID: "LC-1", Status: event.StatusPlaced, HoldUntil: &past}); !strings.Contains(page, `<span class="badge expired">due 2s ago</span>`) {
		t.Errorf("a due hold is not shown due:\n%s", page)
	}
	page = render(&event.OrderSnapshot{LCID: "LC-1", Status: event.StatusExpired})
	if !strings.Contains(page, `<span class="badge expired" id="order-status">expired</span>`) || !strings.Contains(page, `<td id="order-hold">-</td>`) {
		t.Errorf("an expired order:\n%s", page)
	}
}
