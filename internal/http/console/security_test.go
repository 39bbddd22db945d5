package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
)

const consoleHost = "console.test"

// clock is a settable clock for a console's Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// deps are the services a test console runs on; several consoles over the same deps
// are replicas of one junban-api.
type deps struct {
	rc     redis.UniversalClient
	prefix string
	db     *gorm.DB
	queues config.SQS
	sqs    bool
}

func newDeps(t *testing.T) *deps {
	rc, prefix := testenv.Redis(t)
	return &deps{rc: rc, prefix: prefix, db: testenv.Postgres(t)}
}

// testConsole is a console over the test's Redis prefix and schema, with an API that
// takes the given tokens, a settable clock and its logs recorded.
type testConsole struct {
	t     *testing.T
	c     *Console
	h     http.Handler
	clock *clock
	logs  *observer.ObservedLogs
}

func (d *deps) console(t *testing.T, read, admin []string, tune func(*Config)) *testConsole {
	t.Helper()
	led, err := ledger.New(ledger.Config{Redis: d.rc, Prefix: d.prefix, Loader: inventorydb.PGLoader{DB: d.db}})
	if err != nil {
		t.Fatal(err)
	}
	ad := api.Deps{Redis: d.rc, Prefix: d.prefix, DB: d.db, Ledger: led, Queues: d.queues}
	if d.sqs {
		ad.SQS = testenv.SQS(t)
	}
	a, err := api.New(api.ServerConfig{Deps: ad, Options: api.Options{ReadTokens: read, AdminTokens: admin}})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	tc := &testConsole{t: t, clock: &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}, logs: logs}
	cfg := Config{API: a, Redis: d.rc, Prefix: d.prefix, DB: d.db, SQS: ad.SQS, Queues: d.queues, Logger: zap.New(core), Now: tc.clock.Now}
	if tune != nil {
		tune(&cfg)
	}
	if tc.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	tc.h = Mount(a, tc.c)
	return tc
}

// req is one request to a test console, from remote (an address:port), with the given
// headers and cookie.
type req struct {
	method, path string
	form         url.Values
	remote       string
	headers      map[string]string
	cookie       *http.Cookie
}

// sameOrigin are the headers a browser sends with a form of the console's own.
var sameOrigin = map[string]string{"Origin": "http://" + consoleHost, "Sec-Fetch-Site": "same-origin"}

func (tc *testConsole) do(q req) *httptest.ResponseRecorder {
	tc.t.Helper()
	var body *strings.Reader
	if q.form != nil {
		body = strings.NewReader(q.form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(q.method, "http://"+consoleHost+q.path, body)
	if q.form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	r.RemoteAddr = cmpOr(q.remote, "192.0.2.10:40000")
	for k, v := range q.headers {
		r.Header.Set(k, v)
	}
	if q.cookie != nil {
		r.AddCookie(q.cookie)
	}
	w := httptest.NewRecorder()
	tc.h.ServeHTTP(w, r)
	return w
}

// signIn signs in with token through the sign-in form and returns the cookie it set.
func (tc *testConsole) signIn(token string) *http.Cookie {
	tc.t.Helper()
	w := tc.do(req{method: "POST", path: "/login", form: url.Values{"token": {token}, "next": {"/"}}, headers: sameOrigin})
	if w.Code != http.StatusSeeOther {
		tc.t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	for _, ck := range w.Result().Cookies() {
		if ck.Value != "" && ck.MaxAge >= 0 {
			return ck
		}
	}
	tc.t.Fatalf("sign-in set no cookie: %v", w.Result().Header["Set-Cookie"])
	return nil
}

// signedIn reports whether the overview answers cookie with the page (not the sign-in).
func (tc *testConsole) signedIn(ck *http.Cookie) bool {
	tc.t.Helper()
	w := tc.do(req{method: "GET", path: "/stuck", cookie: ck})
	switch {
	case w.Code == http.StatusOK:
		return true
	case w.Code == http.StatusSeeOther && strings.HasPrefix(w.Header().Get("Location"), "/login"):
		return false
	}
	tc.t.Fatalf("GET /stuck: %d %s", w.Code, w.Header().Get("Location"))
	return false
}

// Cross-origin POSTs to the console are refused whatever their cookie, and so is a POST
// that says nothing of its origin, with a cookie: an admin's session cannot be made to
// redrive a DLQ or sign out by another site, an opaque origin (a sandboxed frame, a
// data: URL) or a client that strips Origin. Refused before anything runs: the
// confirmation page is not rendered, no message moves. (Failed against the old check:
// Origin: null and a POST with neither header redrove the DLQ, 303; /logout from
// another site signed the admin out.)
func TestConsoleRefusesCrossOriginPosts(t *testing.T) {
	d := newDeps(t)
	sqsc := testenv.SQS(t)
	q := testenv.NewQueues(t, sqsc, 5)
	d.queues, d.sqs = config.SQS{OrdersQueue: q.OrdersName, OrdersDLQ: q.OrdersDLQName, ResultsQueue: q.ResultsName, ResultsDLQ: q.ResultsDLQName}, true
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	ck := tc.signIn(adminToken)
	redrive := "/dlq/" + q.OrdersDLQName + "/redrive"
	for _, c := range []struct {
		name    string
		headers map[string]string
	}{
		{"no Origin, no Sec-Fetch-Site", nil},
		{"Origin: null", map[string]string{"Origin": "null"}},
		{"Origin: null, same-origin", map[string]string{"Origin": "null", "Sec-Fetch-Site": "same-origin"}},
		{"another origin", map[string]string{"Origin": "https://elsewhere.example"}},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://other." + consoleHost}},
	} {
		for _, path := range []string{redrive, "/logout", "/orders/LC-1/skip", "/login"} {
			w := tc.do(req{method: "POST", path: path, form: url.Values{"what": {"all"}, "confirm": {"yes"}, "token": {adminToken}}, headers: c.headers, cookie: ck})
			if w.Code != http.StatusForbidden {
				t.Errorf("%s: POST %s answered %d (%s), want 403", c.name, path, w.Code, w.Header().Get("Location"))
			}
		}
	}
	if !tc.signedIn(ck) {
		t.Fatalf("a refused /logout ended the session")
	}
	// The console's own forms pass: the confirmation page, as a browser of today sends
	// it, as one that sends only Origin, and with the token in a header for a script.
	for _, h := range []map[string]string{sameOrigin, {"Origin": "http://" + consoleHost}, {"Sec-Fetch-Site": "same-origin"}} {
		if w := tc.do(req{method: "POST", path: redrive, form: url.Values{"what": {"all"}}, headers: h, cookie: ck}); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="confirm"`) {
			t.Errorf("POST %s with %v: %d, want the confirmation page", redrive, h, w.Code)
		}
	}
	w := tc.do(req{method: "POST", path: redrive, form: url.Values{"what": {"all"}}, headers: map[string]string{"Authorization": "Bearer " + adminToken}})
	if w.Code != http.StatusOK {
		t.Errorf("POST %s with a bearer token and no Origin: %d, want 200", redrive, w.Code)
	}
}

// The cookie holds an opaque session id, not the token: HttpOnly, SameSite=Strict,
// Path=/, a Max-Age of the session's lifetime, and Secure with the __Host- prefix when
// the console is configured so. (Failed against the old login: the cookie was the token,
// with no Max-Age, never Secure over plain HTTP.)
func TestSessionCookie(t *testing.T) {
	d := newDeps(t)
	for _, secure := range []bool{false, true} {
		tc := d.console(t, []string{readToken}, []string{adminToken}, func(c *Config) { c.SecureCookie = secure; c.SessionLifetime = 8 * time.Hour })
		ck := tc.signIn(adminToken)
		if strings.Contains(ck.Value, adminToken) || strings.Contains(ck.Raw, adminToken) || len(ck.Value) < 32 {
			t.Errorf("secure=%v: the cookie %q is not an opaque session id", secure, ck.Raw)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.MaxAge != int((8*time.Hour).Seconds()) || ck.Domain != "" {
			t.Errorf("secure=%v: cookie %q: want HttpOnly, SameSite=Strict, Path=/, Max-Age=28800, no Domain", secure, ck.Raw)
		}
		if ck.Secure != secure || strings.HasPrefix(ck.Name, "__Host-") != secure {
			t.Errorf("secure=%v: cookie %q: Secure %v, name %q", secure, ck.Raw, ck.Secure, ck.Name)
		}
		if !tc.signedIn(ck) {
			t.Errorf("secure=%v: the session cookie does not sign in", secure)
		}
		if ck2 := tc.signIn(adminToken); ck2.Value == ck.Value {
			t.Errorf("two sign-ins got the same session id")
		}
	}
}

// Signing out deletes the session where it is kept: the cookie, sent again (saved by
// someone, or by a browser that ignored the clearing), signs nobody in, on the pages
// or on the buttons. (Failed against the old logout, which only asked the browser to
// forget the token: the same cookie went on working.)
func TestSignOutEndsTheSession(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	ck := tc.signIn(adminToken)
	w := tc.do(req{method: "POST", path: "/logout", headers: sameOrigin, cookie: ck})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login" {
		t.Fatalf("logout: %d %s", w.Code, w.Header().Get("Location"))
	}
	cleared := false
	for _, c := range w.Result().Cookies() {
		cleared = cleared || c.Name == ck.Name && c.MaxAge < 0
	}
	if !cleared {
		t.Errorf("logout did not clear the cookie %s: %v", ck.Name, w.Result().Header["Set-Cookie"])
	}
	if tc.signedIn(ck) {
		t.Fatalf("the cookie of a signed-out session still signs in")
	}
	if w := tc.do(req{method: "POST", path: "/orders/LC-1/skip", headers: sameOrigin, cookie: ck}); w.Code != http.StatusUnauthorized {
		t.Fatalf("a skip with a signed-out session: %d, want 401", w.Code)
	}
}

// A session ends when it has not been used for SessionIdle, and in any case
// SessionLifetime after the sign-in, however busy. (Failed against the old cookie,
// which had no expiry at all.)
func TestSessionExpires(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, func(c *Config) { c.SessionIdle, c.SessionLifetime = 10*time.Minute, time.Hour })
	ck := tc.signIn(readToken)
	tc.clock.add(9 * time.Minute)
	if !tc.signedIn(ck) {
		t.Fatalf("the session ended before its idle time")
	}
	tc.clock.add(11 * time.Minute)
	if tc.signedIn(ck) {
		t.Fatalf("the session outlived its idle time")
	}
	ck = tc.signIn(readToken)
	for range 6 {
		tc.clock.add(9 * time.Minute)
		if !tc.signedIn(ck) {
			t.Fatalf("a session in use ended before its lifetime")
		}
	}
	tc.clock.add(7 * time.Minute)
	if tc.signedIn(ck) {
		t.Fatalf("a session in use outlived its lifetime (%v)", time.Hour)
	}
}

// Sessions live in Redis: a replica of junban-api over the same Redis and tokens takes
// a session another signed in. A session ends on every replica once its token is no
// longer configured (a rotation), and one whose token changed scope ends too. Redis
// holds neither the session id nor the token. (Against the old code: the replica and
// rotation parts held, since the cookie was the token; the Redis part failed, no
// session was kept.)
func TestSessionsSharedAndEndWithTheirToken(t *testing.T) {
	d := newDeps(t)
	const newAdmin = "admin-token-rotated-0123456789"
	a := d.console(t, []string{readToken}, []string{adminToken, newAdmin}, nil)
	a2 := d.console(t, []string{readToken}, []string{adminToken, newAdmin}, nil)
	rotated := d.console(t, []string{readToken}, []string{newAdmin}, nil)
	demoted := d.console(t, []string{readToken, newAdmin}, []string{adminToken}, nil)
	ck, ck2 := a.signIn(adminToken), a.signIn(newAdmin)
	if !a2.signedIn(ck) {
		t.Fatalf("a replica does not take a session another signed in")
	}
	keys, err := d.rc.Keys(context.Background(), d.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, k := range keys {
		v, err := d.rc.Get(context.Background(), k).Result()
		if err != nil {
			continue
		}
		stored++
		for _, secret := range []string{adminToken, newAdmin, ck.Value, ck2.Value} {
			if strings.Contains(k, secret) || strings.Contains(v, secret) {
				t.Errorf("Redis key %s holds a token or a session id", k)
			}
		}
	}
	if stored < 2 {
		t.Errorf("Redis holds %d session records under %s, want 2", stored, d.prefix)
	}
	if rotated.signedIn(ck) {
		t.Fatalf("a session of a token that is no longer configured still signs in")
	}
	if a.signedIn(ck) {
		t.Fatalf("a session refused for its retired token still signs in on another replica")
	}
	if !rotated.signedIn(ck2) {
		t.Fatalf("the session of the token kept is refused")
	}
	if demoted.signedIn(ck2) {
		t.Fatalf("a session whose token changed scope still signs in")
	}
}

// Failed sign-ins are limited per client address: past the limit an address gets 429
// with Retry-After, even with a good token, until the window ends; another address is
// not held up. Each failure is logged at warn with the remote address, never the token
// sent. (Failed against the old login: no limit, no log.)
func TestSignInFailuresLimitedAndLogged(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, func(c *Config) { c.SignInFailures, c.SignInWindow = 3, 2*time.Second })
	const guess = "guessed-token-0123456789"
	signIn := func(remote, token string) *httptest.ResponseRecorder {
		return tc.do(req{method: "POST", path: "/login", remote: remote, form: url.Values{"token": {token}}, headers: sameOrigin})
	}
	for i := range 3 {
		if w := signIn("192.0.2.1:5000", guess+strconv.Itoa(i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, w.Code)
		}
	}
	for _, token := range []string{guess, adminToken} {
		w := signIn("192.0.2.1:5001", token)
		ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if w.Code != http.StatusTooManyRequests || err != nil || ra < 1 {
			t.Fatalf("past the limit: %d, Retry-After %q, want 429 with seconds", w.Code, w.Header().Get("Retry-After"))
		}
	}
	if w := signIn("192.0.2.2:5000", adminToken); w.Code != http.StatusSeeOther {
		t.Fatalf("another address: %d, want 303", w.Code)
	}
	warned := tc.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("sign-in").All()
	if len(warned) < 3 {
		t.Fatalf("%d sign-in failures logged at warn, want 3 at least", len(warned))
	}
	for _, e := range warned {
		if e.ContextMap()["remote"] != "192.0.2.1:5000" && e.ContextMap()["remote"] != "192.0.2.1:5001" {
			t.Errorf("failure logged without its remote address: %v", e.ContextMap())
		}
	}
	for _, e := range tc.logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && (strings.Contains(s, guess) || strings.Contains(s, adminToken)) {
				t.Errorf("log %q: field %s holds a token", e.Message, k)
			}
		}
		if strings.Contains(e.Message, guess) || strings.Contains(e.Message, adminToken) {
			t.Errorf("log %q holds a token", e.Message)
		}
	}
	// The window is a TTL: waited for, not slept.
	testenv.WaitFor(t, 30*time.Second, "the sign-in limit's window to end", func() bool {
		return signIn("192.0.2.1:5002", adminToken).Code == http.StatusSeeOther
	})
}

// Every action of an admin is logged at info with who did it (the token's fingerprint,
// the first 8 hex digits of its SHA-256, and the session's), from where, what and on
// what, and how it ended; never the token or the session id. (Failed against the old
// console: the skip and the redrive-all were not logged, the DLQ picks without who.)
func TestAdminActionsLogged(t *testing.T) {
	d := newDeps(t)
	sqsc := testenv.SQS(t)
	q := testenv.NewQueues(t, sqsc, 5)
	d.queues, d.sqs = config.SQS{OrdersQueue: q.OrdersName, OrdersDLQ: q.OrdersDLQName, ResultsQueue: q.ResultsName, ResultsDLQ: q.ResultsDLQName}, true
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	ck := tc.signIn(adminToken)
	sum := sha256.Sum256([]byte(adminToken))
	fp := hex.EncodeToString(sum[:4])
	for _, a := range []struct {
		path, action, target string
		form                 url.Values
	}{
		{"/dlq/" + q.OrdersDLQName + "/redrive", "dlq.redrive", q.OrdersDLQName, url.Values{"what": {"all"}, "confirm": {"yes"}}},
		{"/dlq/" + q.OrdersDLQName + "/delete", "dlq.delete", q.OrdersDLQName, url.Values{"what": {"one"}, "id": {"m-1"}, "confirm": {"yes"}}},
		{"/orders/LC-AUDIT-1/skip", "turn.skip", "LC-AUDIT-1", url.Values{"confirm": {"yes"}}},
	} {
		tc.do(req{method: "POST", path: a.path, form: a.form, remote: "198.51.100.7:4242", headers: sameOrigin, cookie: ck})
		var found bool
		for _, e := range tc.logs.FilterLevelExact(zapcore.InfoLevel).All() {
			m := e.ContextMap()
			if m["action"] != a.action {
				continue
			}
			found = true
			if m["target"] != a.target || m["remote"] != "198.51.100.7:4242" || m["token_fp"] != fp || len(m["session_fp"].(string)) != 8 {
				t.Errorf("%s logged as %v, want target %s, remote, token %s and an 8-digit session", a.action, m, a.target, fp)
			}
			if _, ok := m["outcome"]; !ok {
				t.Errorf("%s logged without its outcome: %v", a.action, m)
			}
			for k, v := range m {
				if s, ok := v.(string); ok && (strings.Contains(s, adminToken) || strings.Contains(s, ck.Value)) {
					t.Errorf("%s: field %s holds the token or the session id", a.action, k)
				}
			}
		}
		if !found {
			t.Errorf("%s: no info log with action=%s", a.path, a.action)
		}
	}
}

// A next of another site sends the browser to / after the sign-in.
func TestSignInRedirectsOnlyOnSite(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	for next, want := range map[string]string{"/\t/evil.example": "/", "//evil.example": "/", "/orders/LC-1": "/orders/LC-1"} {
		w := tc.do(req{method: "POST", path: "/login", form: url.Values{"token": {readToken}, "next": {next}}, headers: sameOrigin})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
			t.Errorf("next %q: %d to %q, want %q", next, w.Code, w.Header().Get("Location"), want)
		}
	}
}
