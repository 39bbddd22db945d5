package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/idempotency"
	"github.com/junban/junban/internal/testenv"
)

// serverParts is a handler on the real Redis and SQS, its registry and readiness checks.
type serverParts struct {
	h      *webhook.Handler
	reg    *prometheus.Registry
	checks map[string]health.Check
	logs   *observer.ObservedLogs
	log    *zap.Logger
}

// newServerParts checks the real Redis and, under "sqs", sqsCheck (the real queue when nil).
func newServerParts(t *testing.T, sqsCheck health.Check) serverParts {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	c := testenv.SQS(t)
	queueURL := testenv.NewQueues(t, c, 60).Orders.URL
	guard, err := idempotency.New(idempotency.Config{Redis: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	p, err := webhook.NewProvider("stripe", webhook.KindStripe, stripeSecret)
	if err != nil {
		t.Fatal(err)
	}
	log, logs := testenv.Logger(zapcore.DebugLevel)
	sp := serverParts{reg: prometheus.NewRegistry(), logs: logs, log: log}
	sp.h, err = webhook.NewHandler(webhook.HandlerConfig{
		Providers:  []webhook.Provider{p},
		Guard:      guard,
		Publisher:  webhook.SQSPublisher{Client: c, QueueURL: queueURL},
		Logger:     sp.log,
		Registerer: sp.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sqsCheck == nil {
		sqsCheck = health.SQSCheck(c, queueURL)
	}
	sp.checks = map[string]health.Check{"redis": health.RedisCheck(rc), "sqs": sqsCheck}
	return sp
}

// The public listener serves the webhooks and a /healthz that touches nothing; the admin
// one serves the probes and metrics alone.
//
// Failed against the code before the change: the public mux without an admin address
// (NewMux, the binary's default) answered GET /readyz and /metrics with 200 instead of 404.
func TestAdminRoutesOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	sp := newServerParts(t, nil)
	servers := map[string]*httptest.Server{
		"public": httptest.NewServer(webhook.NewPublicMux(sp.h)),
		"admin":  httptest.NewServer(webhook.NewAdminMux(webhook.Admin{Gatherer: sp.reg, Checks: sp.checks, Logger: sp.log})),
	}
	for _, s := range servers {
		t.Cleanup(s.Close)
	}
	// GET /webhooks/stripe is 405 where the webhook route exists, 404 where it does not.
	want := map[string]map[string]int{
		"public": {"/healthz": 200, "/readyz": 404, "/metrics": 404, "/webhooks/stripe": 405, "/debug/pprof/": 404},
		"admin":  {"/healthz": 200, "/readyz": 200, "/metrics": 200, "/webhooks/stripe": 404},
	}
	for name, paths := range want {
		for path, code := range paths {
			if got, body := testenv.Get(t, servers[name].URL+path); got != code {
				t.Errorf("%s listener: GET %s: %d %.200q, want %d", name, path, got, body, code)
			}
		}
	}
}

// /readyz answers each check "ok" or "fail", never the check's error (which may name hosts,
// queue URLs and account ids), and logs the error at warn instead.
//
// Failed against the code before the change: the mux answered
// {"redis":"ok","sqs":"GetQueueAttributes https://sqs.../123456789012/orders: ... secret-host ..."}
// and logged nothing.
func TestReadyzNeverShowsCheckErrors(t *testing.T) {
	t.Parallel()
	const leak = "GetQueueAttributes https://sqs.ap-northeast-1.amazonaws.com/123456789012/orders: dial tcp: lookup secret-host: no such host"
	sp := newServerParts(t, func(context.Context) error { return fmt.Errorf("%s", leak) })
	s := httptest.NewServer(webhook.NewAdminMux(webhook.Admin{Gatherer: sp.reg, Checks: sp.checks, Logger: sp.log}))
	defer s.Close()
	code, body := testenv.Get(t, s.URL+"/readyz")
	if strings.Contains(body, "secret-host") || strings.Contains(body, "123456789012") {
		t.Fatalf("/readyz shows the check's error: %s", body)
	}
	var status map[string]string
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != http.StatusServiceUnavailable || len(status) != 2 || status["redis"] != "ok" || status["sqs"] != "fail" {
		t.Fatalf("/readyz: %d %s, want 503 {\"redis\":\"ok\",\"sqs\":\"fail\"}", code, body)
	}
	logged := sp.logs.FilterMessage("readiness check failed").All()
	if len(logged) != 1 {
		t.Fatalf("%d warnings logged for one failing check, want 1", len(logged))
	}
	e := logged[0]
	if e.Level != zapcore.WarnLevel || e.ContextMap()["check"] != "sqs" || !strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "secret-host") {
		t.Errorf("logged %v %v, want warn with check=sqs and the error", e.Level, e.ContextMap())
	}
}

// A flood of /readyz does not multiply the calls to Redis and SQS: 60 concurrent requests
// make one real check of each (the result is shared for ReadyCache), and all get 200.
//
// Failed against the code before the change (every /readyz ran every check): 60 Redis
// PINGs and 60 GetQueueAttributes.
func TestReadyzFloodChecksOnce(t *testing.T) {
	t.Parallel()
	sp := newServerParts(t, nil)
	var calls sync.Map // check name -> *atomic.Int64
	counted := map[string]health.Check{}
	for name, c := range sp.checks {
		n := &atomic.Int64{}
		calls.Store(name, n)
		counted[name] = func(ctx context.Context) error { n.Add(1); return c(ctx) }
	}
	s := httptest.NewServer(webhook.NewAdminMux(webhook.Admin{Gatherer: sp.reg, Checks: counted, Logger: sp.log, ReadyCache: time.Hour}))
	defer s.Close()
	const requests = 60
	codes := make(chan int, requests)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range requests {
		wg.Go(func() {
			<-start
			code, _ := testenv.Get(t, s.URL+"/readyz")
			codes <- code
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("/readyz: %d, want 200", c)
		}
	}
	calls.Range(func(name, n any) bool {
		if got := n.(*atomic.Int64).Load(); got != 1 {
			t.Errorf("%d concurrent /readyz ran the %s check %d times, want 1", requests, name, got)
		}
		return true
	})
}

// JUNBAN_WEBHOOK_ADMIN_ADDR is a free loopback port by default (also when set empty) and
// must be host:port when set.
//
// Failed against the code before the change: it does not compile (Config has no AdminAddr),
// and the binary ignored the variable (TestInvalidSettingsReportedAtOnce in
// cmd/webhook-gateway).
func TestConfigAdminAddr(t *testing.T) {
	base := []string{"JUNBAN_STACK_ENV", t.TempDir() + "/absent.env", "REDIS_URL", "redis://127.0.0.1:6379/0",
		"AWS_REGION", "us-east-1", "JUNBAN_WEBHOOK_PROVIDERS", "stripe:stripe:" + stripeSecret}
	for _, c := range []struct {
		value string
		bad   bool
		want  string
	}{{"", false, webhook.AdminAddrDefault}, {"127.0.0.1:0", false, "127.0.0.1:0"}, {":9090", false, ":9090"}, {"9090", true, ""}, {"localhost", true, ""}} {
		kv := append(append([]string(nil), base...), "JUNBAN_WEBHOOK_ADMIN_ADDR", c.value)
		for i := 0; i < len(kv); i += 2 {
			t.Setenv(kv[i], kv[i+1])
		}
		cfg, err := config.Load[webhook.Config]()
		if c.bad != (err != nil) || (c.bad && !strings.Contains(err.Error(), "JUNBAN_WEBHOOK_ADMIN_ADDR")) {
			t.Errorf("JUNBAN_WEBHOOK_ADMIN_ADDR=%q: error %v, want an error: %v", c.value, err, c.bad)
		}
		if err == nil && cfg.AdminAddr != c.want {
			t.Errorf("JUNBAN_WEBHOOK_ADMIN_ADDR=%q read as %q, want %q", c.value, cfg.AdminAddr, c.want)
		}
	}
}
