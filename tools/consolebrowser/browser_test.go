// Package consolebrowser_test drives junban-api's console (internal/http/console, over its
// exported API and the real binaries) in headless Chromium. It lives in the lab's module so
// that the services' go.mod does not require chromedp.
package consolebrowser_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/http/console"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

const (
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
)

// chromiumPath returns Debian's chromium, installing it with scripts/chromium.sh under CI;
// elsewhere a missing browser skips the test and says how to get it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := cmpOr(os.Getenv("JUNBAN_CHROMIUM"), "/usr/bin/chromium")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("CI") == "" {
		t.Skipf("%s is missing: run scripts/chromium.sh (it runs apt-get install chromium)", p)
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "scripts", "chromium.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/chromium.sh: %v\n%s", err, out)
	}
	return p
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fleet is the real thing the console looks at: two order-workers and a persist-worker
// (the binaries) on the test's own Redis prefix, schema and queues, and junban-api's
// handler with the console mounted, over httptest.
type fleet struct {
	t      *testing.T
	q      testenv.Queues
	pub    *queue.Publisher
	srv    *httptest.Server
	api    *api.Server
	db     *gorm.DB
	led    *ledger.Ledger
	spec   loadgen.Spec
	w      loadgen.Workload
	sum    loadgen.Summary
	sqsCfg config.SQS
}

func startFleet(t *testing.T) *fleet {
	f := &fleet{t: t}
	rc, prefix := testenv.Redis(t)
	pgURL := testenv.PostgresURL(t)
	db, err := (config.Postgres{URL: pgURL}).Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	f.db = db
	sqsc := testenv.SQS(t)
	f.q = testenv.NewQueues(t, sqsc, 5)
	envv := append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+prefix, "DATABASE_URL="+pgURL,
		"JUNBAN_ORDERS_QUEUE="+f.q.Orders.URL, "JUNBAN_ORDERS_DLQ="+f.q.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+f.q.Results.URL, "JUNBAN_RESULTS_DLQ="+f.q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOCK_TTL=2s", "JUNBAN_SWEEP_INTERVAL=500ms",
		"JUNBAN_LOG_LEVEL=warn", "JUNBAN_SHUTDOWN_BUDGET=5s",
	)
	for i := range 2 {
		testenv.Start(t, fmt.Sprintf("order-worker-%d", i), testenv.Binary(t, "order-worker"), envv)
	}
	testenv.Start(t, "persist-worker", testenv.Binary(t, "persist-worker"), envv)
	if f.pub, err = queue.NewPublisher(queue.PublisherConfig{Client: sqsc, QueueURL: f.q.Orders.URL}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.pub.Stop(context.Background()) })
	f.sqsCfg = config.SQS{OrdersQueue: f.q.OrdersName, OrdersDLQ: f.q.OrdersDLQName,
		ResultsQueue: f.q.ResultsName, ResultsDLQ: f.q.ResultsDLQName}
	if f.led, err = ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}}); err != nil {
		t.Fatal(err)
	}
	f.api, err = api.New(api.ServerConfig{
		Deps: api.Deps{
			Redis: rc, Prefix: prefix, DB: db,
			Ledger: f.led,
			SQS:    sqsc, Queues: f.sqsCfg, Nudge: intake.Nudger(f.pub),
		},
		Options:    api.Options{ReadTokens: []string{readToken}, AdminTokens: []string{adminToken}},
		Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := console.New(console.Config{API: f.api, Redis: rc, Prefix: prefix, DB: db, SQS: sqsc, Queues: f.sqsCfg})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(console.Mount(f.api, cons))
	t.Cleanup(f.srv.Close)

	f.spec = loadgen.DefaultSpec("C" + testenv.ID())
	f.spec.Orders, f.spec.SKUs, f.spec.StockPerLot = 60, 5, 200
	f.w = loadgen.Generate(f.spec)
	f.sum, err = loadgen.Run(context.Background(), db, f.pub, loadgen.RunConfig{Spec: f.spec, Wait: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if f.sum.Missing != 0 || f.sum.Persisted != f.sum.Distinct {
		t.Fatalf("load: %d missing, %d persisted of %d distinct", f.sum.Missing, f.sum.Persisted, f.sum.Distinct)
	}
	return f
}

// queueLine creates sku in PostgreSQL with one unit and queues lcid's line for three
// through the ledger: two units wait. It returns sku.
func queueLine(t *testing.T, f *fleet, sku, lcid string) string {
	t.Helper()
	for _, q := range []string{`INSERT INTO skus (sku, safety_stock, version) VALUES (?, 0, 1)`,
		`INSERT INTO lots (sku, lot_id, kind, best_before, reg_seq, valid_from, valid_to, sellable) VALUES
  (?, 'L1', 'onhand', '2027-01-01', 1, '0001-01-01', '9999-12-31', 1)`} {
		if err := f.db.Exec(q, sku).Error; err != nil {
			t.Fatal(err)
		}
	}
	res, err := f.led.Apply(context.Background(), stock.BackorderRequest{OpID: "wait-1", SKU: sku, Holder: lcid, Line: "1",
		Qty: 3, TargetDate: "2026-12-01", Mode: stock.ModeShip, QueuedAt: time.Now().UnixMilli()})
	if err != nil || res.Queued != 2 {
		t.Fatalf("backorder on %s: %+v %v", sku, res, err)
	}
	return sku
}

// insertOutboxRow writes an unpublished outbox row created ageSec seconds ago.
func insertOutboxRow(t *testing.T, db *gorm.DB, lcid string, ageSec int) {
	t.Helper()
	id := uuid.NewString()
	body, _ := json.Marshal(map[string]any{"id": id, "kind": "order.refused", "entity": lcid, "lcid": lcid, "seq": 1,
		"occurred_at": "2026-12-01T10:00:00Z", "caused_by": map[string]string{"event_id": "evt-1", "type": "order.placed"},
		"data": map[string]string{"reason": "ERR_SHORTAGE"}})
	err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body, created_at, published_at)
VALUES (?, 'order.refused', ?, 1, ?, now() - make_interval(secs => ?), NULL)`,
		id, lcid, string(body), ageSec).Error
	if err != nil {
		t.Fatal(err)
	}
}

// browser is one headless Chromium with a fresh profile; it records every console
// message and uncaught exception of its pages.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu     sync.Mutex
	page   string
	errors []string
	times  map[string]float64
}

func newBrowser(t *testing.T, base string) *browser {
	exe := chromiumPath(t)
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel3)
	b := &browser{t: t, ctx: ctx, base: base, times: map[string]float64{}}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s: %s %s (%s)", b.page, m.Type, m.Text, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser on %s: %v", b.page, err)
	}
}

// open navigates to path and records how long the page took in the browser: from
// the start of the navigation to DOMContentLoaded.
func (b *browser) open(name, path string) {
	b.t.Helper()
	b.mu.Lock()
	b.page = name
	b.mu.Unlock()
	b.do(chromedp.Navigate(b.base + path))
	ms, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`(() => { const n = performance.getEntriesByType("navigation")[0]; return n.domContentLoadedEventEnd - n.startTime; })()`))
	if err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	b.times[name] = ms
	b.mu.Unlock()
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	if err != nil {
		b.t.Fatalf("text of %s on %s: %v", sel, b.page, err)
	}
	return strings.TrimSpace(s)
}

func (b *browser) eval(js string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](js))
	if err != nil {
		b.t.Fatalf("%s on %s: %v", js, b.page, err)
	}
	return n
}

// shot saves a PNG of the whole page into JUNBAN_CONSOLE_SCREENSHOTS (make
// console-screenshots: docs/console/), else into the test's temporary directory.
func (b *browser) shot(name string) { b.shotOf(name, chromedp.FullScreenshot(100)) }

func (b *browser) shotOf(name string, a chromedp.Action[[]byte]) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatal(err)
	}
	dir := os.Getenv("JUNBAN_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) login(token string) {
	b.t.Helper()
	b.open("login", "/login")
	b.do(chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("header nav")))
}

// httpSignIn signs in with token through the sign-in form, as a browser on the console's
// page sends it, and returns the session cookie.
func httpSignIn(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == console.CookieName && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("sign-in over HTTP: %d, no session cookie", resp.StatusCode)
	return nil
}

func (b *browser) scheme(dark bool) {
	b.t.Helper()
	v := "light"
	if dark {
		v = "dark"
	}
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}})
		return err
	}))
}

// The console in a real Chromium against the real fleet after a load: the overview
// shows the load's counts, refreshes by itself and shows an outbound event waiting and a
// due hold; an
// order found by the search shows its timeline; a SKU's page shows a line waiting in its
// queue; a poison message dead-lettered as the order-worker does it shows under
// Dead letters with its reason, is redriven from the page (through its confirmation),
// and its result appears on the order page; a read token sees no admin button and a
// forged admin POST with it gets 403; no page logs an error or a warning.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("the browser test runs a fleet and a browser (about a minute); not under -short")
	}
	chromiumPath(t)
	f := startFleet(t)
	b := newBrowser(t, f.srv.URL)

	// Overview: the counts of the load, refreshed without a reload.
	b.login(adminToken)
	b.open("overview", "/")
	want := fmt.Sprint(f.sum.Persisted)
	if got := b.text("#persisted-total"); got != want {
		t.Fatalf("overview: %s results persisted, the load persisted %s", got, want)
	}
	if got, want := b.text("#orders-placed"), fmt.Sprint(f.sum.OrdersByStatus["placed"]); got != want {
		t.Fatalf("overview: %s orders placed, the load %s", got, want)
	}
	// The page polls: its sample time changes with no navigation.
	first := b.text("#sampled-at")
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("sampled-at").textContent !== %q && document.querySelector("#chart polyline").getAttribute("points") !== ""`, first),
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("overview did not refresh by itself: %v", err)
	}
	// An outbound event waiting for the relay shows up on the next refresh.
	insertOutboxRow(t, f.db, f.w.Orders[0], 30)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`Number(document.getElementById("outbox-depth").textContent) >= 1`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("overview did not show the outbox row: %v", err)
	}
	// A reservation past its hold_until that no expiry ended shows as a due hold.
	if err := f.db.Exec(`INSERT INTO orders (lcid, status, mode, hold_until, seq, last_event_id)
VALUES (?, 'placed', 'reserve', now() - interval '1 minute', 1, 'e-due')`, f.spec.Run+"-DUE").Error; err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`Number(document.getElementById("due-holds").textContent) >= 1 && parseFloat(document.getElementById("due-oldest").textContent) >= 60`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("overview did not show the due hold: %v", err)
	}
	b.text("#orders-expired")
	b.shot("overview")

	// Order: search from the page, see the timeline.
	lcid := f.w.Orders[0]
	b.open("order-search", "/orders")
	b.do(chromedp.SendKeys(chromedp.ID("lcid"), lcid), chromedp.Click(chromedp.ID("find-order")),
		chromedp.WaitVisible(chromedp.ID("timeline")))
	events := map[string]bool{}
	for _, ev := range f.w.Events {
		if ev.LCID == lcid {
			events[ev.EventID] = true
		}
	}
	if n := b.eval(`document.querySelectorAll("#timeline tr[data-event]").length`); n != len(events) {
		t.Fatalf("order %s: %d timeline rows, %d distinct events", lcid, n, len(events))
	}
	for id := range events {
		if b.eval(fmt.Sprintf(`document.querySelectorAll('#timeline tr[data-event=%q]').length`, id)) != 1 {
			t.Fatalf("order %s: event %s not in the timeline once", lcid, id)
		}
	}
	b.open("order", "/orders/"+url.PathEscape(lcid))
	b.text("#order-hold")
	b.shot("order")

	// SKU.
	sku := loadgen.SKUName(f.spec.Run, 0)
	b.open("sku", "/skus/"+url.PathEscape(sku))
	if b.eval(`document.querySelectorAll("#lots tbody tr").length`) < 2 || b.eval(`document.querySelectorAll("#moves tbody tr").length`) < 1 {
		t.Fatalf("SKU page of %s has no lots or no moves", sku)
	}
	b.text("#availability")
	if got := b.text("#waiting"); !strings.HasPrefix(got, "0 unit(s) waited for by 0 order line(s)") {
		t.Fatalf("SKU page of %s: waiting demand %q, want none", sku, got)
	}
	b.shotOf("sku", chromedp.CaptureScreenshot()) // the viewport: the page has 200 moves
	// A SKU with a line waiting for stock: one unit now, the other two queued.
	waitSKU := queueLine(t, f, f.spec.Run+"-WAIT", f.w.Orders[1])
	b.open("sku-queue", "/skus/"+url.PathEscape(waitSKU))
	if got := b.text("#waiting"); !strings.HasPrefix(got, "2 unit(s) waited for by 1 order line(s)") {
		t.Fatalf("SKU page of %s: waiting demand %q", waitSKU, got)
	}
	if b.eval(`document.querySelectorAll("#queue tbody tr").length`) != 1 ||
		b.eval(fmt.Sprintf(`document.querySelectorAll('#queue a[href="/orders/%s"]').length`, url.PathEscape(f.w.Orders[1]))) != 1 {
		t.Fatalf("SKU page of %s: the queue does not show %s's line", waitSKU, f.w.Orders[1])
	}
	b.shot("sku-queue")

	// A poison message: a placement dead-lettered as the order-worker dead-letters an
	// event (queue.DeadLetter, with its reason and source queue).
	var placed event.Order
	for _, ev := range f.w.Events {
		if ev.Type == event.OrderPlaced {
			placed = ev
			break
		}
	}
	poison := f.spec.Run + "-POISON"
	placed.LCID, placed.EventID = poison, poison+"-placed"
	body, _ := json.Marshal(placed)
	if err := queue.DeadLetter(context.Background(), testenv.SQS(t), f.q.Orders.DLQURL, body,
		"ERR_MAX_ATTEMPTS stock service away", map[string]string{queue.AttrSourceQueue: f.q.OrdersName}, queue.Keys{}); err != nil {
		t.Fatal(err)
	}
	b.open("dlq", "/dlq")
	sel := `details[data-reason="ERR_MAX_ATTEMPTS"]`
	if got := b.text(sel + " .full-reason"); got != "ERR_MAX_ATTEMPTS stock service away" {
		t.Fatalf("dead letters: reason %q", got)
	}
	if !strings.Contains(b.text(sel+" pre"), poison+"-placed") {
		t.Fatalf("dead letters: the body is not the poison message's")
	}
	b.shot("dlq")
	b.do(chromedp.Click(chromedp.CSS(sel+` button[data-action="redrive-one"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	b.mu.Lock()
	b.page = "confirm"
	b.mu.Unlock()
	b.shot("confirm")
	b.do(chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	if got := b.text("#flash"); !strings.HasPrefix(got, "redrove 1 ") {
		t.Fatalf("after the redrive: %q", got)
	}
	// Its result on the order page, once the fleet applied it.
	testenv.WaitFor(t, 30*time.Second, "the redriven "+placed.EventID+"'s result on the order page", func() bool {
		b.open("order-poison", "/orders/"+url.PathEscape(poison))
		return b.eval(fmt.Sprintf(`document.querySelectorAll('#timeline tr[data-event=%q]').length`, placed.EventID)) == 1
	})

	b.open("stuck", "/stuck")
	b.text("#stuck")
	b.shot("stuck")

	// A phone, in dark mode.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.scheme(true)
	b.open("overview-phone", "/")
	b.shot("overview-phone-dark")
	b.open("order-phone", "/orders/"+url.PathEscape(lcid))
	b.shot("order-phone-dark")
	b.scheme(false)
	b.do(chromedp.EmulateViewport(1280, 900))

	// A read token: the pages, no buttons; the admin POSTs get 403.
	b.open("logout", "/")
	b.do(chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.ID("token")))
	b.login(readToken)
	for _, p := range [][2]string{{"read-overview", "/"}, {"read-order", "/orders/" + url.PathEscape(lcid)}, {"read-stuck", "/stuck"}, {"read-dlq", "/dlq"}} {
		b.open(p[0], p[1])
		if n := b.eval(`document.querySelectorAll("button.admin, form[action$='/redrive'], form[action$='/delete'], form[action$='/skip']").length`); n != 0 {
			t.Fatalf("%s with a read token: %d admin buttons", p[1], n)
		}
	}
	if !strings.Contains(b.text("#q-orders_dlq .hint"), "admin token") {
		t.Fatalf("dead letters with a read token do not say why they show no message")
	}
	b.shot("dlq-read-token")
	readCookie, adminCookie := httpSignIn(t, f.srv.URL, readToken), httpSignIn(t, f.srv.URL, adminToken)
	for _, target := range []string{"/dlq/" + f.q.OrdersDLQName + "/redrive", "/dlq/" + f.q.OrdersDLQName + "/delete", "/orders/" + url.PathEscape(lcid) + "/skip"} {
		form := url.Values{"what": {"all"}, "confirm": {"yes"}}
		req, _ := http.NewRequest("POST", f.srv.URL+target, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.srv.URL)
		req.AddCookie(readCookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("forged POST %s with a read token: %d, want 403", target, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/dlq/"+f.q.OrdersDLQName+"/redrive", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("API redrive with a read token: %v %v", resp.StatusCode, err)
	}
	// From another site, even an admin token's POST is refused.
	req, _ = http.NewRequest("POST", f.srv.URL+"/dlq/"+f.q.OrdersDLQName+"/redrive", strings.NewReader("what=all&confirm=yes"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://elsewhere.example")
	req.AddCookie(adminCookie)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST with an admin token: %v %v", resp.StatusCode, err)
	}

	time.Sleep(300 * time.Millisecond) // late console messages of the last page
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Fatalf("the browser logged %d error(s)/warning(s):\n%s", len(b.errors), strings.Join(b.errors, "\n"))
	}
	var lines []string
	for name, ms := range b.times {
		lines = append(lines, fmt.Sprintf("%s %.0f ms", name, ms))
	}
	t.Logf("render times (navigation start to DOMContentLoaded, %d orders, %d events): %s", f.spec.Orders, f.sum.Distinct, strings.Join(lines, ", "))
}

// A turn whose event keeps failing, in the console: listed under Stuck turns with a
// link to its order, whose page shows the event in hand with its attempts and error and
// a skip button for an admin; the skip, through its confirmation, marks the event, and
// the worker's next run quarantines it as skipped. The turn is a lockhandoff of the test
// whose handler always fails (no fleet: nothing else may take the turn).
func TestConsoleSkipsAStuckTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; not under -short")
	}
	chromiumPath(t)
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	sqsc := testenv.SQS(t)
	q := testenv.NewQueues(t, sqsc, 5)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: sqsc, QueueURL: q.Orders.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	cfg := config.SQS{OrdersQueue: q.OrdersName, OrdersDLQ: q.OrdersDLQName, ResultsQueue: q.ResultsName, ResultsDLQ: q.ResultsDLQName}
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.ServerConfig{
		Deps: api.Deps{Redis: rc, Prefix: prefix, DB: db, Ledger: led,
			SQS: sqsc, Queues: cfg, Nudge: intake.Nudger(pub)},
		Options: api.Options{ReadTokens: []string{readToken}, AdminTokens: []string{adminToken}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := console.New(console.Config{API: a, Redis: rc, Prefix: prefix, DB: db, SQS: sqsc, Queues: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(console.Mount(a, cons))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var quarantined []lockhandoff.Failure
	hd, err := lockhandoff.New(lockhandoff.Config{
		Redis:  rc,
		Prefix: prefix, MaxAttempts: 1000, HandlerRetries: 1,
		Handler: lockhandoff.Funcs{OnQuarantine: func(ctx context.Context, tn lockhandoff.Turn, env []byte, f lockhandoff.Failure) (lockhandoff.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			quarantined = append(quarantined, f)
			return lockhandoff.Result{}, nil
		}, OnStep: func(ctx context.Context, tn lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
			return lockhandoff.Result{}, errors.New("stock service away")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hd.Stop(context.Background()) }()
	lcid := "LC-STUCK-" + testenv.ID()
	if _, err := hd.Submit(context.Background(), lcid, []byte(`{"event_id":"evt-stuck","type":"payment.confirmed","lcid":"`+lcid+`","occurred_at":"2026-12-01T10:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()

	b := newBrowser(t, srv.URL)
	b.login(adminToken)
	b.open("stuck-one", "/stuck")
	if got := b.text(fmt.Sprintf(`#stuck a[href="/orders/%s"]`, lcid)); got != lcid {
		t.Fatalf("stuck turns: link %q", got)
	}
	b.shot("stuck-one")
	b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#stuck a[href="/orders/%s"]`, lcid))), chromedp.WaitVisible(chromedp.ID("turn")))
	if got := b.text("#turn"); !strings.Contains(got, "evt-stuck") || !strings.Contains(got, "stock service away") {
		t.Fatalf("the order page's turn does not show the event in hand: %q", got)
	}
	b.shot("order-stuck")
	b.do(chromedp.Click(chromedp.ID("skip")), chromedp.WaitVisible(chromedp.ID("confirm")))
	b.do(chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("flash")))
	if got := b.text("#flash"); !strings.HasPrefix(got, "skip asked for evt-stuck") {
		t.Fatalf("after the skip: %q", got)
	}
	if err := hd.Resume(context.Background(), lcid); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	mu.Lock()
	if len(quarantined) != 1 || !quarantined[0].Skipped {
		t.Fatalf("quarantined: %+v", quarantined)
	}
	mu.Unlock()
	b.open("stuck-none", "/stuck")
	b.text("#none-stuck")
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.errors) > 0 {
		t.Fatalf("the browser logged %d error(s)/warning(s):\n%s", len(b.errors), strings.Join(b.errors, "\n"))
	}
}
