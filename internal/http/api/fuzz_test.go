package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// maxProblemBytes bounds a problem's body, whatever the request held.
const maxProblemBytes = 1024

// answerOf is the answer the server gives a handler's err: its status and body.
func answerOf(t *testing.T, err error) (int, []byte) {
	t.Helper()
	s := &Server{log: zap.NewNop(), o: Options{RequestTimeout: time.Second}}
	rec := httptest.NewRecorder()
	s.fail(rec, httptest.NewRequest("GET", "/v1/x", nil), err)
	return rec.Code, rec.Body.Bytes()
}

// refusedWell fails the test unless err is answered as a short 4xx problem.
func refusedWell(t *testing.T, what string, err error) {
	t.Helper()
	code, body := answerOf(t, err)
	if code < 400 || code > 499 || len(body) > maxProblemBytes {
		t.Fatalf("%s: %v answered %d with %d bytes: %.300s", what, err, code, len(body), body)
	}
}

// validID is what checkID lets through, said independently.
func validID(v string, max int) bool {
	return v != "" && len(v) <= max && event.CheckID(v) == nil
}

var idPatterns = []string{"/v1/skus/{sku}", "/v1/skus/{sku}/availability", "/v1/skus/{sku}/queue", "/v1/orders/{lcid}",
	"/v1/turns/{lcid}/skip", "/v1/dlq/{queue}", "/v1/dlq/{queue}/redrive"}

// A path id passes exactly when it is within its bound and event.CheckID takes it;
// otherwise it is a short 400.
func FuzzPathIDs(f *testing.F) {
	for _, s := range []string{"LC-1", "", "sku:A", "SKU é", "LC\x00X", "LC\xffX", "LC\u0085X", "{LC}",
		strings.Repeat("x", event.MaxIDLength), strings.Repeat("x", MaxEntityLength), strings.Repeat("é", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, p := range idPatterns {
			err := checkPathIDs(p, func(string) string { return v })
			max := event.MaxIDLength
			if strings.HasPrefix(p, "/v1/turns/") {
				max = MaxEntityLength
			}
			if ok := validID(v, max); ok != (err == nil) {
				t.Fatalf("%s with %q: valid %v, error %v", p, v, ok, err)
			}
			if err != nil {
				if code, _ := answerOf(t, err); code != http.StatusBadRequest {
					t.Fatalf("%s with %q: %d", p, v, code)
				}
				refusedWell(t, p, err)
			}
		}
	})
}

// Every endpoint's query: a short 4xx problem or values within their bounds.
func FuzzQueries(f *testing.F) {
	for _, s := range []string{"", "limit=10&cursor=" + encodeCursor("LC-1"), "status=placed&sku=A", "status=nope",
		"date=2026-12-01&mode=reserve&qty=3", "date=2026-12-01&location=store-1",
		"date=2026-12-01&location=", "date=2026-12-01&location=%7E", "date=2026-12-01&location=" + strings.Repeat("l", 65), "date=2026-02-30", "date=2026-12-01&qty=1e3", "older_than=5m",
		"older_than=-1s", "cursor=%00", "cursor=" + encodeCursor("LC\x00"), "cursor=" + encodeCursor("12"),
		"limit=-1", "limit=99999999999999999999", "x=1", "due_before=2026-12-03T09:00:00Z&limit=5",
		"due_before=2026-12-03T09:00:00.123456789+09:00", "due_before=2026-13-03T09:00:00Z", "due_before=%00", "due_before=0001-01-01T00:00:00Z", "sku=%7Bx%7D", "sku=" + strings.Repeat("s", 300), "a=1&a=2;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, _ := url.ParseQuery(raw) // the server reads what parses, as r.URL.Query() does
		if limit, cursor, err := pageQuery(q, 100, 1000); err != nil {
			refusedWell(t, "page", err)
		} else if limit < 1 || limit > 1000 || (cursor != "" && !validID(cursor, MaxEntityLength)) {
			t.Fatalf("page %q: limit %d, cursor %q", raw, limit, cursor)
		}
		if limit, after, _, err := seqPageQuery(q, 200, 1000); err != nil {
			refusedWell(t, "seq page", err)
		} else if limit < 1 || limit > 1000 || after < 0 {
			t.Fatalf("seq page %q: limit %d, after %d", raw, limit, after)
		}
		if f, err := orderListQuery(q); err != nil {
			refusedWell(t, "orders", err)
		} else if (f.status != "" && !orderStatuses[f.status]) || (f.sku != "" && stock.CheckSKU(f.sku) != nil) || (f.cursor != "" && !validID(f.cursor, event.MaxIDLength)) {
			t.Fatalf("orders %q: %+v", raw, f)
		}
		if h, err := holdListQuery(q); err != nil {
			refusedWell(t, "holds", err)
		} else if h.limit < 1 || h.limit > 1000 || (q.Get("due_before") != "") != (h.dueBefore != nil) {
			t.Fatalf("holds %q: %+v", raw, h)
		}
		if age, limit, cursor, err := stuckQuery(q, time.Minute); err != nil {
			refusedWell(t, "stuck", err)
		} else if age <= 0 || limit < 1 || limit > 500 || (cursor != "" && !validID(cursor, MaxEntityLength)) {
			t.Fatalf("stuck %q: %v %d %q", raw, age, limit, cursor)
		}
		if a, loc, err := availabilityQuery(q); err != nil {
			refusedWell(t, "availability", err)
		} else if stock.CheckDate("date", a.TargetDate) != nil || (a.Mode != stock.ModeShip && a.Mode != stock.ModeReserve) || a.Qty < 0 || a.Qty > stock.MaxQty ||
			(loc != "" && stock.CheckLocation(loc) != nil) || (loc == "" && q.Has("location")) {
			t.Fatalf("availability %q: %+v, location %q", raw, a, loc)
		}
	})
}

// A cursor the API gives comes back as it was; any other is a short 400.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"LC-1", "sku:A", "42", "", "LC\x00", "\xff", strings.Repeat("x", MaxEntityLength+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, got, err := pageQuery(url.Values{"cursor": {encodeCursor(s)}}, 1, 1)
		switch {
		case s == "":
			if err != nil || got != "" {
				t.Fatalf("no cursor: %q %v", got, err)
			}
		case validID(s, MaxEntityLength):
			if err != nil || got != s {
				t.Fatalf("cursor of %q: %q %v", s, got, err)
			}
		case err == nil:
			t.Fatalf("cursor of %q taken", s)
		default:
			refusedWell(t, "cursor", err)
		}
	})
}

// A cart body: a short 4xx problem, or one request per item with the date, mode and
// quantities checked.
func FuzzCartBody(f *testing.F) {
	for _, s := range []string{`{"date":"2026-12-01","items":[{"sku":"A","qty":2}]}`, `{"date":"2026-12-01","mode":"reserve","items":[{"sku":"A"},{"sku":"B","qty":0}]}`,
		`{"date":"2026-12-01","items":[]}`, `{"date":"2026-12-01","items":[{"sku":"A","qty":-1}]}`, `{"date":`, ``, `{} {}`,
		`{"date":"2026-12-01","items":[{"sku":"A\u0000"}]}`, `{"date":"x","mode":"both","items":[{"sku":"A"}]}`,
		`{"colour":1}`, `[1,2]`, `{"date":"2026-12-01","items":[{"sku":"A","qty":1e30}]}`} {
		f.Add("application/json", []byte(s))
	}
	f.Add("text/plain", []byte(`{}`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest("POST", "/v1/availability", bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 4096)
		req, rs, err := cartRequests(r, 10)
		if err != nil {
			refusedWell(t, "cart", err)
			return
		}
		if len(rs) < 1 || len(rs) > 10 || len(rs) != len(req.Items) || stock.CheckDate("date", req.Date) != nil {
			t.Fatalf("cart %q: %d requests, %+v", body, len(rs), req)
		}
		for i, a := range rs {
			if a.SKU != req.Items[i].SKU || a.Qty < 0 || a.Qty > stock.MaxQty || a.TargetDate != req.Date || (a.Mode != stock.ModeShip && a.Mode != stock.ModeReserve) {
				t.Fatalf("cart %q: item %d %+v", body, i, a)
			}
		}
	})
}

// The default names let only this machine's names through, whatever the Host says; a
// configured list lets each of its names through with any port; refused requests get a
// short 421 problem.
func FuzzHosts(f *testing.F) {
	for _, s := range [][2]string{{"junban.internal", "junban.internal:8090"}, {"*", "evil.example"}, {"10.0.0.5,[fd00::1]", "[fd00::1]:80"},
		{"a,,b", "localhost"}, {"ops.example.", "OPS.EXAMPLE"}, {"x", "127.0.0.1.evil.example"}, {"x", "[::ffff:127.0.0.1]:1"}, {"x", ""}} {
		f.Add(s[0], s[1])
	}
	loop := LoopbackHosts("127.0.0.1")
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	f.Fuzz(func(t *testing.T, list, host string) {
		if loop.Allows(host) && !Loopback(canonicalHost(hostOf(host))) {
			t.Fatalf("the loopback default lets %q through", host)
		}
		h, err := ParseHosts(list)
		if err == nil && !h.any {
			for n := range h.names {
				withPort := n + ":8090"
				if strings.Contains(n, ":") {
					withPort = "[" + n + "]:8090"
				}
				if !h.Allows(n) || !h.Allows(withPort) || !h.Allows(strings.ToUpper(n)) {
					t.Fatalf("%q does not let its name %q through", list, n)
				}
			}
		}
		r := httptest.NewRequest("GET", "/v1/orders", nil)
		r.Host = host
		rec := httptest.NewRecorder()
		OnlyHosts(loop, ok).ServeHTTP(rec, r)
		switch {
		case rec.Code == http.StatusNoContent && loop.Allows(host):
		case rec.Code == http.StatusMisdirectedRequest && !loop.Allows(host) && rec.Body.Len() <= maxProblemBytes:
		default:
			t.Fatalf("Host %q: %d %.300s", host, rec.Code, rec.Body.Bytes())
		}
	})
}
