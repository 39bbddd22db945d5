package api

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

// Ids in paths and queries are checked before any lookup: a 60 KB lcid gets a short 400
// (not the lookups, not an echo), a NUL or an invalid byte a 400 (not PostgreSQL's
// refusal as a 503 and a warning), and ids that are fine still reach their lookups.
// Broken variant tried: the API before the checks answered the 60 KB lcid 404 with the
// whole lcid twice in the body, the NUL lcid and the NUL cursor 503 with a warning
// logged, and the 60 KB status, date and parameter name 400 with the whole input in the
// body.
func TestIDsAreCheckedBeforeAnyLookup(t *testing.T) {
	e := newEnv(t)
	huge := strings.Repeat("L", 60<<10)
	cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct{ method, path, token string }{
		{"GET", "/v1/orders/" + huge, readToken},
		{"GET", "/v1/orders/LC%00X", readToken},
		{"GET", "/v1/orders/LC%FFX", readToken},
		{"GET", "/v1/orders/LC%C2%85X", readToken}, // U+0085, a control character
		{"GET", "/v1/orders/" + strings.Repeat("x", 256), readToken},
		{"GET", "/v1/skus/" + huge, readToken},
		{"GET", "/v1/skus/A%00", readToken},
		{"GET", "/v1/skus/A%FF", readToken},
		{"GET", "/v1/skus/A%00/availability?date=2026-12-01", readToken},
		{"GET", "/v1/dlq/" + huge, adminToken},
		{"GET", "/v1/dlq/q%00", adminToken},
		{"POST", "/v1/dlq/" + huge + "/redrive", adminToken},
		{"POST", "/v1/turns/" + huge + "/skip", adminToken},
		{"POST", "/v1/turns/LC%00X/skip", adminToken},
		{"POST", "/v1/turns/sku:" + strings.Repeat("x", 256) + "/skip", adminToken},
		{"GET", "/v1/orders?status=" + huge, readToken},
		{"GET", "/v1/orders?sku=" + huge, readToken},
		{"GET", "/v1/orders?sku=A%00", readToken},
		{"GET", "/v1/orders?cursor=" + cursor("LC\x00X"), readToken},
		{"GET", "/v1/orders?cursor=" + cursor("LC\xffX"), readToken},
		{"GET", "/v1/orders?cursor=" + cursor(huge), readToken},
		{"GET", "/v1/orders?limit=" + huge, readToken},
		{"GET", "/v1/orders?" + huge + "=1", readToken},
		{"GET", "/v1/turns/stuck?cursor=" + cursor("{LC}"), readToken},
		{"GET", "/v1/turns/stuck?older_than=" + huge, readToken},
		{"GET", "/v1/skus/A?cursor=" + cursor(huge), readToken},
		{"GET", "/v1/skus/A/availability?date=" + huge, readToken},
		{"GET", "/v1/skus/A/availability?date=2026-12-01&mode=" + huge, readToken},
		{"GET", "/v1/skus/A/availability?date=2026-12-01&qty=" + huge, readToken},
	} {
		code, body := e.do(c.method, c.path, c.token, nil)
		if code != 400 || len(body) > 1024 {
			t.Errorf("%s %.60s...: %d, want a short 400: %.300s (%d bytes)", c.method, c.path, code, body, len(body))
		}
	}
	// An unknown path is not echoed whole either.
	if code, body := e.do("GET", "/v1/nothing/"+huge, readToken, nil); code != 404 || len(body) > 1024 {
		t.Errorf("unknown 60 KB path: %d, %d bytes", code, len(body))
	}
	// A body with a 60 KB unknown field is not echoed whole.
	if code, body := e.do("POST", "/v1/availability", readToken, `{"`+huge+`":1}`); code != 400 || len(body) > 1024 {
		t.Errorf("60 KB unknown field: %d, %d bytes", code, len(body))
	}
	for _, l := range e.logs.All() {
		t.Errorf("logged: %s %v", l.Message, l.ContextMap())
	}

	// Ids that are fine reach their lookups: not found, not refused.
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/v1/orders/LC-1", readToken, 404},
		{"GET", "/v1/orders/" + url.PathEscape("LC-é-1"), readToken, 404},
		{"GET", "/v1/orders/" + strings.Repeat("x", 255), readToken, 404},
		{"GET", "/v1/skus/" + url.PathEscape("SKU é"), readToken, 404},
		{"GET", "/v1/orders?cursor=" + cursor("LC-1") + "&sku=A&status=placed", readToken, 200},
		{"GET", "/v1/turns/stuck?cursor=" + cursor("sku:A"), readToken, 200},
		{"POST", "/v1/turns/sku:" + strings.Repeat("x", 255) + "/skip", adminToken, 409},
		{"GET", "/v1/dlq/" + e.q.OrdersDLQName, adminToken, 200},
	} {
		if code, body := e.do(c.method, c.path, c.token, nil); code != c.want {
			t.Errorf("%s %.80s: %d, want %d: %.300s", c.method, c.path, code, c.want, body)
		}
	}
}
