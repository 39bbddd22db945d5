package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/http/health"
)

// /readyz answers each check with one of these, never with the check's error.
const (
	readyOK   = "ok"
	readyFail = "fail"
)

// ReadyCacheDefault is Admin.ReadyCache's default: however often /readyz is asked, Redis
// and SQS see at most one check each per second.
const ReadyCacheDefault = time.Second

// NewPublicMux serves what the payment providers reach: the webhooks and a /healthz that
// touches nothing (the process is alive, for a load balancer's check of this port). Every
// other path is 404: readiness and metrics are on the admin listener alone (NewAdminMux).
//
// Each request is a server span (OpenTelemetry's net/http instrumentation), continuing a
// trace the request's traceparent header names; the order event it sends carries it on.
func NewPublicMux(h *Handler) http.Handler {
	mux := http.NewServeMux()
	h.Register(mux)
	mux.HandleFunc("GET /healthz", healthz)
	return otelhttp.NewHandler(mux, "webhook",
		otelhttp.WithFilter(func(r *http.Request) bool { return r.URL.Path != "/healthz" }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}

func healthz(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) }

// Admin configures the admin listener's routes.
type Admin struct {
	// Gatherer is what /metrics serves (required).
	Gatherer prometheus.Gatherer
	// Checks are /readyz's checks, by name.
	Checks map[string]health.Check
	// Logger logs a failing check's error at warn, once per run of the check; nil logs nothing.
	Logger *zap.Logger
	// ReadyCache is how long a check's result answers /readyz before the check runs again
	// (health.Cached). Default ReadyCacheDefault.
	ReadyCache time.Duration
}

// NewAdminMux serves /healthz (the process is alive), /readyz (every check passes: 503
// otherwise) and /metrics. /readyz answers each check "ok" or "fail" only: a check's
// error may name hosts, queue URLs and account ids, so it goes to the log at warn instead.
func NewAdminMux(a Admin) *http.ServeMux {
	log := a.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if a.ReadyCache <= 0 {
		a.ReadyCache = ReadyCacheDefault
	}
	names := make([]string, 0, len(a.Checks))
	checks := make(map[string]health.Check, len(a.Checks))
	for n, c := range a.Checks {
		names = append(names, n)
		checks[n] = health.Cached(logFailure(log, n, c), a.ReadyCache)
	}
	sort.Strings(names)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		status, ok := make(map[string]string, len(names)), true
		for _, n := range names {
			ctx, cancel := context.WithTimeout(r.Context(), health.CheckTimeout)
			err := checks[n](ctx)
			cancel()
			status[n] = readyOK
			if err != nil {
				ok, status[n] = false, readyFail
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(status)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Gatherer, promhttp.HandlerOpts{}))
	return mux
}

// logFailure logs c's errors under name; wrapped inside the cache, it logs once per run.
func logFailure(log *zap.Logger, name string, c health.Check) health.Check {
	return func(ctx context.Context) error {
		err := c(ctx)
		if err != nil {
			log.Warn("readiness check failed", zap.String("check", name), zap.Error(err))
		}
		return err
	}
}

// Server returns an http.Server for handler on c.HTTPAddr with the configured timeouts.
func (c Config) Server(handler http.Handler) *http.Server {
	return &http.Server{
		Addr:              c.HTTPAddr,
		Handler:           handler,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// AdminServer returns an http.Server for handler on c.AdminAddr with the same timeouts.
func (c Config) AdminServer(handler http.Handler) *http.Server {
	s := c.Server(handler)
	s.Addr = c.AdminAddr
	return s
}
