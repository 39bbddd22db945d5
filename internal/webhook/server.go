package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/junban/junban/internal/health"
)

// NewMux serves the webhooks, /healthz (the process is alive), /readyz (every check
// passes: 503 with each check's answer otherwise) and /metrics (g).
func NewMux(h *Handler, g prometheus.Gatherer, checks map[string]health.Check) *http.ServeMux {
	mux := http.NewServeMux()
	h.Register(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		names := make([]string, 0, len(checks))
		for n := range checks {
			names = append(names, n)
		}
		sort.Strings(names)
		status, ok := map[string]string{}, true
		for _, n := range names {
			ctx, cancel := context.WithTimeout(r.Context(), health.CheckTimeout)
			err := checks[n](ctx)
			cancel()
			status[n] = "ok"
			if err != nil {
				ok, status[n] = false, err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(status)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return mux
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
