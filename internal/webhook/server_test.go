package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/health"
	"github.com/junban/junban/internal/idempotency"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/webhook"
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
	core, logs := observer.New(zapcore.DebugLevel)
	sp := serverParts{reg: prometheus.NewRegistry(), logs: logs, log: zap.New(core)}
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

// With an admin listener, the public one serves the webhooks alone and the admin one the
// probes and metrics alone; without, NewMux serves everything as before.
//
// Failed against the code before the change: it does not compile (no NewPublicMux or
// NewAdminMux), and with both names added as the old all-in-one mux, the public listener
// answered GET /healthz, /readyz and /metrics with 200 instead of 404.
func TestAdminRoutesOnTheirOwnListener(t *testing.T) {
	t.Parallel()
	sp := newServerParts(t, nil)
	servers := map[string]*httptest.Server{
		"public":   httptest.NewServer(webhook.NewPublicMux(sp.h)),
		"admin":    httptest.NewServer(webhook.NewAdminMux(sp.reg, sp.checks, sp.log)),
		"combined": httptest.NewServer(webhook.NewMux(sp.h, sp.reg, sp.checks)),
	}
	for _, s := range servers {
		t.Cleanup(s.Close)
	}
	// GET /webhooks/stripe is 405 where the webhook route exists, 404 where it does not.
	want := map[string]map[string]int{
		"public":   {"/healthz": 404, "/readyz": 404, "/metrics": 404, "/webhooks/stripe": 405},
		"admin":    {"/healthz": 200, "/readyz": 200, "/metrics": 200, "/webhooks/stripe": 404},
		"combined": {"/healthz": 200, "/readyz": 200, "/metrics": 200, "/webhooks/stripe": 405},
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
// Failed against the code before the change: the combined mux answered
// {"redis":"ok","sqs":"GetQueueAttributes https://sqs.../123456789012/orders: ... secret-host ..."}
// and logged nothing (the admin mux case was run against NewAdminMux as the old mux).
func TestReadyzNeverShowsCheckErrors(t *testing.T) {
	t.Parallel()
	const leak = "GetQueueAttributes https://sqs.ap-northeast-1.amazonaws.com/123456789012/orders: dial tcp: lookup secret-host: no such host"
	sp := newServerParts(t, func(context.Context) error { return fmt.Errorf("%s", leak) })
	for name, mux := range map[string]http.Handler{
		"combined": webhook.NewMux(sp.h, sp.reg, sp.checks),
		"admin":    webhook.NewAdminMux(sp.reg, sp.checks, sp.log),
	} {
		t.Run(name, func(t *testing.T) {
			s := httptest.NewServer(mux)
			defer s.Close()
			before := sp.logs.FilterMessage("readiness check failed").Len()
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
			if len(logged) != before+1 {
				t.Fatalf("%d warnings logged for one failing check, want 1", len(logged)-before)
			}
			e := logged[len(logged)-1]
			if e.Level != zapcore.WarnLevel || e.ContextMap()["check"] != "sqs" || !strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "secret-host") {
				t.Errorf("logged %v %v, want warn with check=sqs and the error", e.Level, e.ContextMap())
			}
		})
	}
}

// JUNBAN_WEBHOOK_ADMIN_ADDR is empty by default and must be host:port when set.
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
	}{{"", false}, {"127.0.0.1:0", false}, {":9090", false}, {"9090", true}, {"localhost", true}} {
		kv := append(append([]string(nil), base...), "JUNBAN_WEBHOOK_ADMIN_ADDR", c.value)
		for i := 0; i < len(kv); i += 2 {
			t.Setenv(kv[i], kv[i+1])
		}
		cfg, err := config.Load[webhook.Config]()
		if c.bad != (err != nil) || (c.bad && !strings.Contains(err.Error(), "JUNBAN_WEBHOOK_ADMIN_ADDR")) {
			t.Errorf("JUNBAN_WEBHOOK_ADMIN_ADDR=%q: error %v, want an error: %v", c.value, err, c.bad)
		}
		if err == nil && cfg.AdminAddr != c.value {
			t.Errorf("JUNBAN_WEBHOOK_ADMIN_ADDR=%q read as %q", c.value, cfg.AdminAddr)
		}
	}
}
