package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/redis/idempotency"
	"github.com/junban/junban/internal/testenv"
)

const (
	stripeSecret    = "whsec_stripe_current_secret_0123456789"
	stripeOldSecret = "whsec_stripe_previous_secret_987654321"
	acmeSecret      = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// gateway is one test's gateway over real HTTP, Redis and the SQS emulator.
type gateway struct {
	t        *testing.T
	url      string // the public listener
	adminURL string // the admin listener
	sqs      *sqs.Client
	queueURL string
	rc       redis.UniversalClient
	prefix   string
	guard    *idempotency.Guard
	reg      *prometheus.Registry
	logs     *observer.ObservedLogs
	now      time.Time    // the clock at the start; tests sign relative to it
	shift    atomic.Int64 // moves the gateway's clock (a provider retrying later)
	stripe   webhook.Provider
	acme     webhook.Provider
}

type options struct {
	lockTTL        time.Duration
	publishTimeout time.Duration
	maxBody        int64
	maxInFlight    int
	bodyTimeout    time.Duration
	rc             redis.UniversalClient           // instead of the test Redis
	publisher      webhook.Publisher               // instead of SQS
	prefix         string                          // share another gateway's keys
	queueURL       string                          // share another gateway's queue
	readySQS       *sqs.Client                     // the client /readyz asks instead of the test's
	wrap           func(http.Handler) http.Handler // wraps the public mux (a test's probe)
}

func newGateway(t *testing.T, o options) *gateway {
	t.Helper()
	g := &gateway{t: t, now: time.Now().Truncate(time.Second)}
	g.rc, g.prefix = testenv.Redis(t)
	if o.prefix != "" {
		g.prefix = o.prefix
	}
	rc := g.rc
	if o.rc != nil {
		rc = o.rc
	}
	g.sqs = testenv.SQS(t)
	g.queueURL = o.queueURL
	if g.queueURL == "" {
		g.queueURL = testenv.NewQueues(t, g.sqs, 60).Orders.URL
	}
	var err error
	g.guard, err = idempotency.New(idempotency.Config{Redis: rc, Prefix: g.prefix, LockTTL: o.lockTTL})
	if err != nil {
		t.Fatal(err)
	}
	g.stripe, err = webhook.NewProvider("stripe", webhook.KindStripe, stripeSecret, stripeOldSecret)
	if err != nil {
		t.Fatal(err)
	}
	g.acme, err = webhook.NewProvider("acme", webhook.KindStandard, acmeSecret)
	if err != nil {
		t.Fatal(err)
	}
	pub := o.publisher
	if pub == nil {
		pub = webhook.SQSPublisher{Client: g.sqs, QueueURL: g.queueURL}
	}
	log, logs := testenv.Logger(zapcore.DebugLevel)
	g.logs = logs
	g.reg = prometheus.NewRegistry()
	h, err := webhook.NewHandler(webhook.HandlerConfig{
		Providers:       []webhook.Provider{g.stripe, g.acme},
		Guard:           g.guard,
		Publisher:       pub,
		MaxBodyBytes:    o.maxBody,
		PublishTimeout:  o.publishTimeout,
		MaxInFlight:     o.maxInFlight,
		BodyReadTimeout: o.bodyTimeout,
		Now:             g.clock,
		Logger:          log,
		Registerer:      g.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	readySQS := g.sqs
	if o.readySQS != nil {
		readySQS = o.readySQS
	}
	mux := webhook.NewPublicMux(h)
	if o.wrap != nil {
		mux = o.wrap(mux)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	admin := httptest.NewServer(webhook.NewAdminMux(webhook.Admin{Gatherer: g.reg, Logger: log,
		Checks: map[string]health.Check{"redis": health.RedisCheck(rc), "sqs": health.SQSCheck(readySQS, g.queueURL)}}))
	t.Cleanup(admin.Close)
	g.adminURL = admin.URL
	return g
}

// clock is the gateway's injected clock; the handler reads it on the server's goroutines.
func (g *gateway) clock() time.Time { return g.now.Add(time.Duration(g.shift.Load())) }

// delivery is one signed request.
type delivery struct {
	provider webhook.Provider
	id       string // webhook-id (standard)
	at       time.Time
	body     []byte
	header   http.Header // overrides the signature when set
}

type answer struct {
	code   int
	body   []byte
	header http.Header
}

func (g *gateway) post(d delivery) answer {
	g.t.Helper()
	h := d.header
	if h == nil {
		at := d.at
		if at.IsZero() {
			at = g.clock()
		}
		var err error
		if h, err = d.provider.Sign(d.id, at, d.body); err != nil {
			g.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, g.url+"/webhooks/"+d.provider.Name, bytes.NewReader(d.body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: b, header: resp.Header}
}

func stripeBody(t testing.TB, id, typ, lcid string, amount int64) []byte {
	b, err := webhook.Encode(webhook.KindStripe, webhook.ProviderEvent{
		ID: id, Type: typ, LCID: lcid, OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		PaymentID: "pi_" + id, Amount: amount, Currency: "jpy",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderEvents reads every message on the queue without deleting it (a long
// visibility timeout hides each one after its first receive; duplicates by message id
// are dropped).
func (g *gateway) orderEvents() []event.Order {
	g.t.Helper()
	seen := map[string]bool{}
	var out []event.Order
	for empty := 0; empty < 2; {
		r, err := g.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(g.queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 120,
		})
		if err != nil {
			g.t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range r.Messages {
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			var o event.Order
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &o); err != nil {
				g.t.Fatalf("message %s: %v", aws.ToString(m.Body), err)
			}
			out = append(out, o)
		}
	}
	return out
}

func (g *gateway) exactlyOne(eventID string, typ event.Type) {
	g.t.Helper()
	evs := g.orderEvents()
	if len(evs) != 1 {
		g.t.Fatalf("%d order events on the queue, want exactly 1", len(evs))
	}
	if evs[0].EventID != eventID || evs[0].Type != typ || evs[0].LCID != "LC-1" {
		g.t.Fatalf("order event %+v, want %s %s for LC-1", evs[0], eventID, typ)
	}
}

func decodeAnswer(t *testing.T, b []byte) webhook.Answer {
	t.Helper()
	var a webhook.Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

func TestAcceptedStripe(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_ok", "payment_intent.succeeded", "LC-1", 1200)})
	if a.code != http.StatusOK {
		t.Fatalf("%d %s", a.code, a.body)
	}
	ans := decodeAnswer(t, a.body)
	want := webhook.OrderEventID("stripe", "evt_ok")
	if ans.Outcome != webhook.OutcomeAccepted || ans.EventID != want || ans.Type != string(event.PaymentConfirmed) {
		t.Fatalf("answer %+v", ans)
	}
	g.exactlyOne(want, event.PaymentConfirmed)
}

func TestAcceptedStandard(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	body := []byte(`{"type":"payment.refunded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1","amount":1200}}`)
	a := g.post(delivery{provider: g.acme, id: "msg_refund_1", body: body})
	if a.code != http.StatusOK {
		t.Fatalf("%d %s", a.code, a.body)
	}
	g.exactlyOne(webhook.OrderEventID("acme", "msg_refund_1"), event.OrderCancelled)
}

func TestReplayAfterCompletion(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	body := stripeBody(t, "evt_replay", "payment_intent.succeeded", "LC-1", 1200)
	first := g.post(delivery{provider: g.stripe, body: body})
	if first.code != http.StatusOK || first.header.Get(webhook.HeaderReplayed) != "" {
		t.Fatalf("first: %d %s", first.code, first.body)
	}
	// A provider's retry carries a new signature timestamp.
	g.shift.Store(int64(time.Minute))
	for range 3 {
		again := g.post(delivery{provider: g.stripe, body: body})
		if again.code != http.StatusOK || !bytes.Equal(again.body, first.body) || again.header.Get(webhook.HeaderReplayed) != "true" {
			t.Fatalf("retry: %d %s (replayed %q), want 200 %s", again.code, again.body, again.header.Get(webhook.HeaderReplayed), first.body)
		}
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_replay"), event.PaymentConfirmed)
	if n := counterValue(t, g.reg, "junban_webhook_replays_total", "stripe"); n != 3 {
		t.Errorf("replays_total %v, want 3", n)
	}
}

func TestConcurrentDeliveriesOneOrderEvent(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	body := stripeBody(t, "evt_storm", "payment_intent.succeeded", "LC-1", 1200)
	const n = 50
	codes := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i] = g.post(delivery{provider: g.stripe, body: body}).code
		}()
	}
	close(start)
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[http.StatusOK]+count[http.StatusConflict] != n || count[http.StatusOK] == 0 {
		t.Fatalf("answers %v, want only 200 and 409, at least one 200", count)
	}
	t.Logf("answers: %v", count)
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_storm"), event.PaymentConfirmed)
}

func TestDeadHolderTakenOver(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{lockTTL: 2 * time.Second, publishTimeout: 1500 * time.Millisecond})
	body := stripeBody(t, "evt_dead", "payment_intent.succeeded", "LC-1", 1200)
	ev, err := webhook.Parse(webhook.KindStripe, "", body)
	if err != nil {
		t.Fatal(err)
	}
	// Another gateway took the lock for this delivery and died before publishing.
	if _, err := g.guard.Begin(context.Background(), "stripe:evt_dead", ev.PayloadHash()); err != nil {
		t.Fatal(err)
	}
	if a := g.post(delivery{provider: g.stripe, body: body}); a.code != http.StatusConflict || a.header.Get("Retry-After") == "" {
		t.Fatalf("while the dead holder's lock lives: %d %s (Retry-After %q), want 409", a.code, a.body, a.header.Get("Retry-After"))
	}
	testenv.WaitFor(t, 30*time.Second, "the dead holder's lock to expire", func() bool {
		a := g.post(delivery{provider: g.stripe, body: body})
		if a.code != http.StatusOK && a.code != http.StatusConflict {
			t.Fatalf("%d %s", a.code, a.body)
		}
		return a.code == http.StatusOK
	})
	if a := g.post(delivery{provider: g.stripe, body: body}); a.code != http.StatusOK || a.header.Get(webhook.HeaderReplayed) != "true" {
		t.Fatalf("after takeover: %d %s", a.code, a.body)
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_dead"), event.PaymentConfirmed)
}

func TestPayloadMismatch(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_mm", "payment_intent.succeeded", "LC-1", 1200)}); a.code != http.StatusOK {
		t.Fatalf("%d %s", a.code, a.body)
	}
	a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_mm", "payment_intent.succeeded", "LC-1", 9999)})
	if a.code != http.StatusUnprocessableEntity {
		t.Fatalf("same id, other amount: %d %s, want 422", a.code, a.body)
	}
	// While another delivery of the id with another payload is in progress: 422 too.
	if _, err := g.guard.Begin(context.Background(), "stripe:evt_mm2", "another payload"); err != nil {
		t.Fatal(err)
	}
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_mm2", "payment_intent.succeeded", "LC-1", 1)}); a.code != http.StatusUnprocessableEntity {
		t.Fatalf("in progress with another payload: %d %s, want 422", a.code, a.body)
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_mm"), event.PaymentConfirmed)
}

func TestBadRequest(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	for name, body := range map[string]string{
		"not json":      `{"id":"evt_1",`,
		"no lcid":       `{"id":"evt_1","type":"payment_intent.succeeded","created":1795946400,"data":{"object":{}}}`,
		"no id":         `{"type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"metadata":{"lcid":"LC-1"}}}}`,
		"no created":    `{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{"metadata":{"lcid":"LC-1"}}}}`,
		"empty":         ``,
		"not an object": `"hello"`,
	} {
		if a := g.post(delivery{provider: g.stripe, body: []byte(body)}); a.code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, a.code, a.body)
		}
	}
	if a := g.post(delivery{provider: g.acme, id: "msg_1", body: []byte(`{"type":"payment.succeeded","data":{"lcid":"LC-1"}}`)}); a.code != http.StatusBadRequest {
		t.Errorf("standard without timestamp: %d %s, want 400", a.code, a.body)
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order events for invalid payloads: %+v", evs)
	}
}

func TestSignatureChecks(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	body := stripeBody(t, "evt_sig", "payment_intent.succeeded", "LC-1", 1200)
	wrong, _ := webhook.NewProvider("stripe", webhook.KindStripe, "whsec_an_attackers_guess_000000000")
	old, _ := webhook.NewProvider("stripe", webhook.KindStripe, stripeOldSecret)
	signed := func(p webhook.Provider, at time.Time, b []byte) http.Header {
		h, err := p.Sign("", at, b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	cases := []struct {
		name string
		h    http.Header
		body []byte
		want int
	}{
		{"wrong secret", signed(wrong, g.now, body), body, 401},
		{"tampered body", signed(g.stripe, g.now, body), bytes.Replace(body, []byte("LC-1"), []byte("LC-2"), 1), 401},
		{"stale timestamp", signed(g.stripe, g.now.Add(-6*time.Minute), body), body, 401},
		{"future timestamp", signed(g.stripe, g.now.Add(6*time.Minute), body), body, 401},
		{"no signature", http.Header{}, body, 401},
		{"garbage signature", http.Header{"Stripe-Signature": {"t=x,v1=y"}}, body, 401},
		{"rotated: the previous secret still verifies", signed(old, g.now, body), body, 200},
	}
	for _, c := range cases {
		a := g.post(delivery{provider: g.stripe, header: c.h, body: c.body})
		if a.code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, a.code, a.body, c.want)
		}
	}
	// Standard Webhooks: wrong key, stale, future, tampered.
	sbody := []byte(`{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1"}}`)
	otherKey, _ := webhook.NewProvider("acme", webhook.KindStandard, "whsec_"+strings.Repeat("QUJD", 8))
	for name, d := range map[string]delivery{
		"standard wrong secret": {provider: otherKey, id: "msg_s", body: sbody},
		"standard stale":        {provider: g.acme, id: "msg_s", body: sbody, at: g.now.Add(-10 * time.Minute)},
		"standard future":       {provider: g.acme, id: "msg_s", body: sbody, at: g.now.Add(10 * time.Minute)},
	} {
		if a := g.post(d); a.code != 401 {
			t.Errorf("%s: %d %s, want 401", name, a.code, a.body)
		}
	}
	h, _ := g.acme.Sign("msg_s", g.now, sbody)
	if a := g.post(delivery{provider: g.acme, header: h, body: append(sbody[:len(sbody):len(sbody)], ' ')}); a.code != 401 {
		t.Errorf("standard tampered body: %d, want 401", a.code)
	}
	if n := counterValue(t, g.reg, "junban_webhook_requests_total", "401", "stripe"); n != 6 {
		t.Errorf("requests_total{code=401,provider=stripe} = %v, want 6", n)
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_sig"), event.PaymentConfirmed)
}

func TestTooLarge(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{maxBody: 1024})
	big := stripeBody(t, "evt_big", "payment_intent.succeeded", strings.Repeat("L", 2000), 1)
	if a := g.post(delivery{provider: g.stripe, body: big}); a.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d %s, want 413", a.code, a.body)
	}
	// Without a Content-Length (chunked), the limit still holds while reading.
	h, _ := g.stripe.Sign("", g.now, big)
	req, _ := http.NewRequest(http.MethodPost, g.url+"/webhooks/stripe", io.MultiReader(bytes.NewReader(big)))
	req.Header = h
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: %d, want 413", resp.StatusCode)
	}
}

func TestRedisUnavailable(t *testing.T) {
	t.Parallel()
	down, err := config.Redis{URL: "redis://127.0.0.1:1/0"}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	g := newGateway(t, options{rc: down})
	a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_noredis", "payment_intent.succeeded", "LC-1", 1)})
	if a.code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", a.code, a.body)
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order event published without the guard: %+v", evs)
	}
	resp, err := http.Get(g.adminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with Redis down: %d, want 503", resp.StatusCode)
	}
}

// Failed against NewHandler comparing before it filled in the defaults: a zero publish
// timeout passed under a 5s lock TTL, then ran as PublishTimeoutDefault (10s).
func TestNewHandlerPublishTimeoutUnderLockTTL(t *testing.T) {
	t.Parallel()
	rc, prefix := testenv.Redis(t)
	guard, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix, LockTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stripe, err := webhook.NewProvider("stripe", webhook.KindStripe, stripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		publishTimeout time.Duration
		ok             bool
	}{{0, false}, {5 * time.Second, false}, {4 * time.Second, true}} {
		_, err := webhook.NewHandler(webhook.HandlerConfig{Providers: []webhook.Provider{stripe}, Guard: guard,
			Publisher: webhook.SQSPublisher{}, PublishTimeout: tc.publishTimeout})
		if tc.ok && err != nil {
			t.Errorf("publish timeout %v: %v", tc.publishTimeout, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "lock TTL")) {
			t.Errorf("publish timeout %v under a 5s lock TTL: %v, want a lock TTL error", tc.publishTimeout, err)
		}
	}
}

// dropReply is a TCP proxy in front of the test Redis that loses one reply: the first
// reply starting with the byte want to a command containing marker never reaches the
// client, whose connection is closed instead (after Redis ran the command). go-redis
// then resends the command, as it does after an EOF or a read timeout.
type dropReply struct {
	target string
	marker []byte
	want   byte
	armed  atomic.Bool
}

func newDropReply(t *testing.T, marker string, want byte) (*dropReply, redis.UniversalClient) {
	t.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &dropReply{target: opt.Addr, marker: []byte(marker), want: want}
	p.armed.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	opt.Addr = ln.Addr().String()
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	return p, rc
}

func (p *dropReply) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	// go-redis sends one command and waits for its reply, so a reply follows its command.
	var marked atomic.Bool
	go func() {
		defer client.Close()
		defer server.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if err != nil {
				return
			}
			marked.Store(bytes.Contains(buf[:n], p.marker))
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if err != nil {
			return
		}
		if marked.Swap(false) && buf[0] == p.want && p.armed.CompareAndSwap(true, false) {
			return
		}
		if _, err := client.Write(buf[:n]); err != nil {
			return
		}
	}
}

// Failed against the scripts before the fix: the resent begin found the lock its first
// run took and the only delivery got 409 with nothing published; the resent complete
// found the record its first run wrote and a false "completed record not written" was
// logged at warn.
func TestLostRedisReplyIsResent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		reply  byte // begin answers an array, complete an integer
	}{{"begin", '*'}, {"complete", ':'}} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			id := "evt_lost_" + tc.script
			p, rc := newDropReply(t, id, tc.reply)
			g := newGateway(t, options{rc: rc})
			body := stripeBody(t, id, "payment_intent.succeeded", "LC-1", 1)
			if a := g.post(delivery{provider: g.stripe, body: body}); a.code != http.StatusOK {
				t.Fatalf("%d %s, want 200", a.code, a.body)
			}
			if p.armed.Load() {
				t.Fatal("no reply was lost: the test proves nothing")
			}
			if warns := g.logs.FilterLevelExact(zapcore.WarnLevel).All(); len(warns) > 0 {
				t.Fatalf("warned: %v", warns[0].Message)
			}
			if a := g.post(delivery{provider: g.stripe, body: body}); a.code != http.StatusOK || a.header.Get(webhook.HeaderReplayed) != "true" {
				t.Fatalf("retry: %d %s, want a replay", a.code, a.body)
			}
			g.exactlyOne(webhook.OrderEventID("stripe", id), event.PaymentConfirmed)
		})
	}
}

func TestSQSUnavailableThenRetry(t *testing.T) {
	t.Parallel()
	// An SQS endpoint that refuses connections, one attempt per send.
	downSQS, err := queue.NewClient(context.Background(), config.SQS{Region: "us-east-1", Endpoint: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	downSQS = sqs.New(downSQS.Options(), func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	first := newGateway(t, options{})
	broken := newGateway(t, options{prefix: first.prefix, queueURL: first.queueURL,
		publisher: webhook.SQSPublisher{Client: downSQS, QueueURL: first.queueURL}, readySQS: downSQS})
	body := stripeBody(t, "evt_nosqs", "payment_intent.succeeded", "LC-1", 1)
	if a := broken.post(delivery{provider: broken.stripe, body: body}); a.code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", a.code, a.body)
	}
	resp, err := http.Get(broken.adminURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(rb), `"redis":"ok"`) || strings.Contains(string(rb), `"sqs":"ok"`) {
		t.Fatalf("/readyz with SQS down: %d %s, want 503 naming sqs", resp.StatusCode, rb)
	}
	// Nothing was recorded and the lock was released: the provider's retry, through a
	// gateway that reaches SQS, publishes the order event at once.
	if a := first.post(delivery{provider: first.stripe, body: body}); a.code != http.StatusOK || a.header.Get(webhook.HeaderReplayed) != "" {
		t.Fatalf("retry: %d %s, want a fresh 200", a.code, a.body)
	}
	first.exactlyOne(webhook.OrderEventID("stripe", "evt_nosqs"), event.PaymentConfirmed)
}

func TestIgnoredEvents(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	for _, c := range []struct{ id, typ, reason string }{
		{"evt_failed", "payment_intent.payment_failed", webhook.IgnorePaymentFailed},
		{"evt_customer", "customer.created", webhook.IgnoreUnknownType},
	} {
		a := g.post(delivery{provider: g.stripe, body: stripeBody(t, c.id, c.typ, "", 1)})
		ans := decodeAnswer(t, a.body)
		if a.code != http.StatusOK || ans.Outcome != webhook.OutcomeIgnored || ans.Reason != c.reason || ans.EventID != "" {
			t.Errorf("%s: %d %+v", c.typ, a.code, ans)
		}
	}
	partial, _ := webhook.Encode(webhook.KindStripe, webhook.ProviderEvent{ID: "evt_partial", Type: "charge.refunded", LCID: "LC-1",
		OccurredAt: time.Unix(1795946400, 0), PartialRefund: true})
	a := g.post(delivery{provider: g.stripe, body: partial})
	if ans := decodeAnswer(t, a.body); a.code != http.StatusOK || ans.Reason != webhook.IgnorePartialRefund {
		t.Errorf("partial refund: %d %s", a.code, a.body)
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order events for ignored types: %+v", evs)
	}
}

func TestRoutesAndProbes(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	if a := g.post(delivery{provider: webhook.Provider{Name: "nobody"}, header: http.Header{}, body: []byte("{}")}); a.code != http.StatusNotFound {
		t.Errorf("unknown provider: %d", a.code)
	}
	for path, want := range map[string]int{"/webhooks/stripe": 405, "/healthz": 200, "/readyz": 404, "/metrics": 404} {
		resp, err := http.Get(g.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("public listener: GET %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
	if n := counterValue(t, g.reg, "junban_webhook_requests_total", "404", "unknown"); n != 1 {
		t.Errorf("requests_total{code=404,provider=unknown} = %v", n)
	}
}

// Secrets never reach the logs, whatever the outcome, nor fmt or JSON renderings of
// the configuration.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	body := stripeBody(t, "evt_log", "payment_intent.succeeded", "LC-1", 1)
	g.post(delivery{provider: g.stripe, body: body})
	g.post(delivery{provider: g.stripe, body: body, at: g.now.Add(-time.Hour)})
	g.post(delivery{provider: g.stripe, body: []byte("{")})
	h, _ := g.stripe.Sign("", g.now, body)
	g.post(delivery{provider: g.stripe, header: h, body: append([]byte(nil), append(body, ' ')...)})
	cfg := webhook.Config{Providers: webhook.Secret("stripe:stripe:" + stripeSecret)}
	js, _ := json.Marshal(cfg)
	var all strings.Builder
	for _, e := range g.logs.All() {
		all.WriteString(e.Message)
		for k, v := range e.ContextMap() {
			fmt.Fprintf(&all, " %s=%v", k, v)
		}
	}
	fmt.Fprintf(&all, "%v %+v %#v %s %s %v", cfg, cfg, cfg, js, g.stripe, g.acme)
	if g.logs.Len() == 0 {
		t.Fatal("nothing logged at debug level")
	}
	for _, s := range []string{stripeSecret, stripeOldSecret, acmeSecret, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		if strings.Contains(all.String(), s) {
			t.Fatalf("a secret appears in logs or renderings:\n%s", all.String())
		}
	}
}

// counterValue reads a counter from reg by its label values in label-name order.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i >= len(labels) || lp.GetValue() != labels[i] {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
