package api

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/testenv"
)

// insertOutbound writes an outbox row of kind k for entity, its body a valid message, and
// returns the body as stored.
func (e *env) insertOutbound(k outbound.Kind, entity string, seq int64) string {
	e.t.Helper()
	m := outbound.Message{ID: uuid.NewString(), Kind: k, Entity: entity, Seq: seq,
		OccurredAt: time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC),
		CausedBy:   outbound.Cause{EventID: fmt.Sprintf("evt-%s-%d", entity, seq), Type: event.OrderPlaced}}
	var data any
	if sku, ok := strings.CutPrefix(entity, event.SKUEntityPrefix); ok {
		m.SKU = sku
		data = outbound.StockLevelData{AvailableToShip: 3, Threshold: 10, Level: outbound.LevelLow, Previous: outbound.LevelOK, AsOf: "2026-12-02"}
	} else {
		m.LCID = entity
		data = outbound.OrderStatusData{To: "placed", Lines: []event.SnapshotLine{}, Changed: []string{"status"}}
	}
	var err error
	if m.Data, err = json.Marshal(data); err != nil {
		e.t.Fatal(err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body) VALUES (?, ?, ?, ?, ?)`,
		m.ID, string(k), entity, seq, string(body)).Error; err != nil {
		e.t.Fatal(err)
	}
	return string(body)
}

// events pages GET /v1/events with query (without after) from the start until a page
// comes back empty, and returns every event's body as served and the last cursor.
func (e *env) events(query string) ([]string, string) {
	e.t.Helper()
	var got []string
	after := ""
	for {
		path := "/v1/events?" + query
		if after != "" {
			path += "&after=" + after
		}
		code, body := e.do("GET", path, readToken, nil)
		if code != 200 {
			e.t.Fatalf("GET %s: %d %s", path, code, body)
		}
		var raw struct {
			Events []json.RawMessage `json:"events"`
			Next   string            `json:"next"`
		}
		decode(e.t, body, &raw)
		if len(raw.Events) == 0 {
			if after != "" && raw.Next != after {
				e.t.Fatalf("GET %s: an empty page with next %q", path, raw.Next)
			}
			return got, raw.Next
		}
		for _, ev := range raw.Events {
			if err := outbound.Validate(ev); err != nil {
				e.t.Fatalf("GET %s: %v\n%s", path, err, ev)
			}
			got = append(got, string(ev))
		}
		after = raw.Next
	}
}

// GET /v1/events: pages of 2 to the end serve every body as stored, in order, each valid
// against its kind's schema; kind and entity filter; a cursor from the last page gives an
// empty page; a bad cursor, limit, kind or entity is a 400 problem; a read token suffices.
func TestEvents(t *testing.T) {
	e := newEnv(t)
	if got, next := e.events("limit=2"); len(got) != 0 || next == "" {
		t.Fatalf("empty outbox: %q, next %q", got, next)
	}
	var all, lc1, sku []string
	for i := range 3 {
		b := e.insertOutbound(outbound.OrderStatusChanged, "LC-1", int64(i+1))
		all, lc1 = append(all, b), append(lc1, b)
		all = append(all, e.insertOutbound(outbound.OrderStatusChanged, "LC-2", int64(i+1)))
		b = e.insertOutbound(outbound.StockLow, "sku:TEA-1", int64(i+1))
		all, sku = append(all, b), append(sku, b)
	}
	// A transaction open anywhere on the server holds the pages back until it ends.
	var got []string
	var last string
	testenv.WaitFor(t, time.Minute, "every event served", func() bool {
		got, last = e.events("limit=2")
		return len(got) == len(all)
	})
	if !slices.Equal(got, all) {
		t.Fatalf("served\n%q\nwant\n%q", got, all)
	}
	code, body := e.do("GET", "/v1/events?after="+last, readToken, nil)
	if want := `{"events":[],"next":"` + last + `"}` + "\n"; code != 200 || string(body) != want {
		t.Fatalf("after the last page: %d %s", code, body)
	}
	if got, _ := e.events("limit=2&entity=LC-1"); !slices.Equal(got, lc1) {
		t.Fatalf("entity LC-1: %q, want %q", got, lc1)
	}
	if got, _ := e.events("kind=stock.low,stock.out&entity=" + url.QueryEscape("sku:TEA-1")); !slices.Equal(got, sku) {
		t.Fatalf("kinds stock.low,stock.out: %q, want %q", got, sku)
	}
	if got, _ := e.events("kind=order.refused"); len(got) != 0 {
		t.Fatalf("order.refused: %q", got)
	}
	bad := base64URL("v1.1")
	// A letter after the last digit: appending to the encoded cursor could spell another cursor.
	raw, err := base64.RawURLEncoding.DecodeString(last)
	if err != nil {
		t.Fatal(err)
	}
	trailing := base64URL(string(raw) + "x")
	for _, q := range []string{"after=" + bad, "after=%21%21", "after=" + trailing, "limit=0", "limit=1001", "limit=x",
		"kind=order.nope", "kind=stock.low,", "kind=", "entity=", "entity=%7Bx%7D", "entity=LC%00", "entity=" + strings.Repeat("x", MaxEntityLength+1),
		"cursor=" + last, "colour=red"} {
		if code, body := e.do("GET", "/v1/events?"+q, readToken, nil); code != 400 {
			t.Errorf("GET /v1/events?%s: %d, want 400: %s", q, code, body)
		}
	}
	if code, _ := e.do("GET", "/v1/events", "", nil); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
}

func base64URL(s string) string { return encodeCursor(s) }

// The OpenAPI document's OutboundEvent names exactly the outbound kinds.
func TestOpenAPIOutboundKinds(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range outbound.Kinds {
		kinds = append(kinds, string(k))
	}
	if got := doc.Components.Schemas["OutboundEvent"].Properties["kind"].Enum; !slices.Equal(got, kinds) {
		t.Errorf("openapi.json OutboundEvent.kind: %q, want %q", got, kinds)
	}
}

// A GET /v1/events query: a short 4xx problem, or a query within its bounds whose cursor,
// kinds and entity are what was sent.
func FuzzEventsQuery(f *testing.F) {
	last := outbound.Cursor{}.String()
	for _, s := range []string{"", "limit=2", "after=" + last, "after=" + encodeCursor("v1.7.3"), "after=" + encodeCursor("v1.07.3"),
		"after=%00", "kind=stock.low,stock.out", "kind=stock.low&kind=order.refused", "kind=,", "kind=x", "entity=LC-1",
		"entity=sku%3ATEA-1", "entity=", "entity=%7B", "entity=" + strings.Repeat("é", 200), "limit=1000", "limit=1001", "limit=-1",
		"limit=99999999999999999999", "cursor=x", "a=1&a=2;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw)
		got, err := eventsQuery(q)
		if err != nil {
			refusedWell(t, "events", err)
			return
		}
		if got.Limit < 1 || got.Limit > outbound.PageLimitMax || got.Check() != nil {
			t.Fatalf("events %q: %+v (%v)", raw, got, got.Check())
		}
		if a := q.Get("after"); a != "" && got.After.String() != a {
			t.Fatalf("events %q: after %s read as %s", raw, a, got.After)
		}
		if got.Entity != q.Get("entity") || (got.Entity != "" && !validID(got.Entity, MaxEntityLength)) {
			t.Fatalf("events %q: entity %q", raw, got.Entity)
		}
		for _, k := range got.Kinds {
			if !slices.Contains(outbound.Kinds, k) || !strings.Contains(strings.Join(q["kind"], ","), string(k)) {
				t.Fatalf("events %q: kind %q", raw, k)
			}
		}
	})
}
