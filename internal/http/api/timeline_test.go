package api

import (
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv"
)

// An order's timeline shows its own moves only, also when another order's event had the
// same event id: PostgreSQL keeps both orders' results (entity and event id) and the
// moves query keys on the entity too. Against the moves query keyed on event_id alone,
// LC-P1's timeline listed LC-P2's move on Q.
func TestTimelineMovesAreTheOrdersOwn(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	var rs []event.Result
	for lcid, sku := range map[string]string{"LC-P1": "P", "LC-P2": "Q"} {
		rs = append(rs, event.Result{
			EventID: "dup-1", Entity: lcid, LCID: lcid, Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied,
			ProcessedAt: time.Now(), Order: &event.OrderSnapshot{LCID: lcid, Status: event.StatusPlaced},
			SKUs: []stock.SKU{{SKU: sku, Version: 2, Lots: []stock.Lot{{LotID: sku + "-L1", Kind: stock.KindOnHand, Good: true,
				ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 9, Allocated: 1}}}},
			Moves: []stock.Move{{OpID: "dup-1:1:alloc", SKU: sku, LotID: sku + "-L1", From: "sellable", To: "allocated", Qty: 1, Version: 2}},
		})
	}
	rep, err := persist.Apply(ctx, db, rs)
	if err != nil || rep.Count(persist.Applied) != 2 {
		t.Fatalf("apply: %+v, %v", rep, err)
	}
	d := Deps{Redis: rc, Prefix: prefix, DB: db}
	for lcid, sku := range map[string]string{"LC-P1": "P", "LC-P2": "Q"} {
		v, err := d.ReadOrder(ctx, lcid, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Timeline) != 1 {
			t.Fatalf("%s: timeline %+v, want its one event", lcid, v.Timeline)
		}
		ms := v.Timeline[0].Moves
		if len(ms) != 1 || ms[0].SKU != sku {
			t.Errorf("%s: moves of dup-1 %+v, want its one move on %s", lcid, ms, sku)
		}
	}
}

// An event's trace id travels from its result through the inbox to the timeline, linked
// when JUNBAN_TRACE_URL is set; an untraced event shows none.
func TestTimelineShowsTraceIDs(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	rs := []event.Result{
		{EventID: "e-1", Entity: "LC-T", LCID: "LC-T", Seq: 1, Type: event.OrderPlaced, Outcome: event.Applied,
			ProcessedAt: time.Now(), Order: &event.OrderSnapshot{LCID: "LC-T", Status: event.StatusPlaced}, TraceID: trace},
		{EventID: "e-2", Entity: "LC-T", LCID: "LC-T", Seq: 2, Type: event.PaymentConfirmed, Outcome: event.Applied,
			ProcessedAt: time.Now(), Order: &event.OrderSnapshot{LCID: "LC-T", Status: event.StatusPlaced, Paid: true}},
	}
	if rep, err := persist.Apply(ctx, db, rs); err != nil || rep.Count(persist.Applied) != 2 {
		t.Fatalf("apply: %+v, %v", rep, err)
	}
	for _, tc := range []struct{ tmpl, want string }{
		{"", ""},
		{"http://jaeger.internal:16686/trace/{trace_id}", "http://jaeger.internal:16686/trace/" + trace},
	} {
		d := Deps{Redis: rc, Prefix: prefix, DB: db, TraceURL: tc.tmpl}
		v, err := d.ReadOrder(ctx, "LC-T", 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Timeline) != 2 {
			t.Fatalf("timeline %+v", v.Timeline)
		}
		if e := v.Timeline[0]; e.TraceID != trace || e.TraceURL != tc.want {
			t.Errorf("traced event: trace %q url %q, want %q %q", e.TraceID, e.TraceURL, trace, tc.want)
		}
		if e := v.Timeline[1]; e.TraceID != "" || e.TraceURL != "" {
			t.Errorf("untraced event: trace %q url %q, want none", e.TraceID, e.TraceURL)
		}
	}
}

func TestCheckTraceURL(t *testing.T) {
	for tmpl, ok := range map[string]bool{
		"": true, "https://tempo.example/explore?trace={trace_id}": true, "http://127.0.0.1:16686/trace/{trace_id}": true,
		"http://jaeger/trace/": false, "javascript:alert(1)//{trace_id}": false, "/trace/{trace_id}": false, "ftp://x/{trace_id}": false,
	} {
		if err := CheckTraceURL(tmpl); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", tmpl, err, ok)
		}
	}
}
