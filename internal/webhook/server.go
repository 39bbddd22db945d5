package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/health"
)

// /readyz answers each check with one of these, never with the check's error.
const (
	readyOK   = "ok"
	readyFail = "fail"
)

// NewMux serves the webhooks and the admin routes (NewAdminMux) on one listener, the
// gateway's handler when JUNBAN_WEBHOOK_ADMIN_ADDR is empty. Failing readiness checks are
// logged with h's logger.
func NewMux(h *Handler, g prometheus.Gatherer, checks map[string]health.Check) *http.ServeMux {
	mux := NewPublicMux(h)
	registerAdmin(mux, g, checks, h.log)
	return mux
}

// NewPublicMux serves the webhooks alone (every other path is 404): what the payment
// providers reach when the admin routes have a listener of their own.
func NewPublicMux(h *Handler) *http.ServeMux {
	mux := http.NewServeMux()
	h.Register(mux)
	return mux
}

// NewAdminMux serves /healthz (the process is alive), /readyz (every check passes: 503
// otherwise) and /metrics (g). /readyz answers each check "ok" or "fail" only: a check's
// error may name hosts, queue URLs and account ids, so it goes to log at warn instead.
func NewAdminMux(g prometheus.Gatherer, checks map[string]health.Check, log *zap.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	registerAdmin(mux, g, checks, log)
	return mux
}

func registerAdmin(mux *http.ServeMux, g prometheus.Gatherer, checks map[string]health.Check, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		status, ok := make(map[string]string, len(names)), true
		for _, n := range names {
			ctx, cancel := context.WithTimeout(r.Context(), health.CheckTimeout)
			err := checks[n](ctx)
			cancel()
			status[n] = readyOK
			if err != nil {
				ok, status[n] = false, readyFail
				log.Warn("readiness check failed", zap.String("check", n), zap.Error(err))
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(status)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
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
