package health

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

func TestReadyzFailsWhileADependencyIsDown(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "junban_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	s, err := New(Config{Addr: "127.0.0.1:0", Registry: reg, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := testenv.Redis(t)
	s.AddCheck("redis", RedisCheck(rc))
	down := errors.New("connection refused")
	var failing atomic.Pointer[error]
	s.AddCheck("sqs", func(context.Context) error {
		if e := failing.Load(); e != nil {
			return *e
		}
		return nil
	})
	// A Redis nobody listens on: the check must fail, not hang.
	dead, err := config.Redis{URL: "redis://127.0.0.1:1/0"}.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	base := "http://" + s.Addr()

	if code, _ := testenv.Get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d", code)
	}
	if code, body := testenv.Get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz %d with every dependency up: %s", code, body)
	}
	failing.Store(&down)
	if code, body := testenv.Get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "connection refused") {
		t.Fatalf("/readyz %d with SQS down: %s", code, body)
	}
	failing.Store(nil)
	s.AddCheck("redis", RedisCheck(dead))
	if code, body := testenv.Get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "redis") {
		t.Fatalf("/readyz %d with Redis down: %s", code, body)
	}
	if code, body := testenv.Get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, "junban_test_total 1") {
		t.Fatalf("/metrics %d: %.200s", code, body)
	}
}
