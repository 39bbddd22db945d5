// Package health serves every junban binary's /healthz, /readyz and /metrics.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/buildinfo"
)

// CheckTimeout bounds each readiness check.
const CheckTimeout = 2 * time.Second

// Check reports whether a dependency can be reached.
type Check func(ctx context.Context) error

// Config configures a Server.
type Config struct {
	// Addr is the host:port to listen on (config.Common.HTTPAddr; port 0 picks one).
	Addr string
	// Registry is what /metrics serves (NewRegistry; required).
	Registry *prometheus.Registry
	// Logger logs the listening address and a failed server; nil logs nothing.
	Logger *zap.Logger
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

// Validate reports what is missing, all at once.
func (c Config) Validate() error {
	var p []error
	if c.Addr == "" {
		p = append(p, errors.New("health: Addr is required"))
	}
	if c.Registry == nil {
		p = append(p, errors.New("health: Registry is required"))
	}
	return errors.Join(p...)
}

// Server serves /healthz (the process is alive), /readyz (every check passes) and
// /metrics (the registry).
type Server struct {
	mu     sync.Mutex
	checks map[string]Check
	addr   string
	log    *zap.Logger
	srv    *http.Server
	ln     net.Listener
}

// NewRegistry returns a registry with the Go and process collectors and the build's
// junban_build_info.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Read().Collector())
	return reg
}

// New returns a server, or an error naming what cfg lacks; add checks with AddCheck,
// then Start.
func New(cfg Config) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := cfg.Registry
	s := &Server{checks: map[string]Check{}, addr: cfg.Addr, log: cfg.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return s, nil
}

// Handle adds another route (the gateway's webhooks share the listener).
func (s *Server) Handle(pattern string, h http.Handler) {
	s.srv.Handler.(*http.ServeMux).Handle(pattern, h)
}

// EnablePprof serves net/http/pprof under /debug/pprof/ (a profile must fit in the
// server's 10 s write timeout: ask for seconds < 10).
func (s *Server) EnablePprof() {
	mux := s.srv.Handler.(*http.ServeMux)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// AddCheck adds a readiness check under name.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	names := make([]string, 0, len(s.checks))
	for n := range s.checks {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	status := map[string]string{}
	ok := true
	for _, n := range names {
		ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
		err := s.checks[n](ctx)
		cancel()
		if err != nil {
			ok = false
			status[n] = err.Error()
		} else {
			status[n] = "ok"
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(status)
}

// Start listens on the Config's Addr and serves in the background until Stop; Addr
// tells the bound address.
func (s *Server) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	s.ln = ln
	s.log.Info("http listening", zap.String("addr", ln.Addr().String()))
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", zap.Error(err))
		}
	}()
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Stop shuts the server down gracefully within ctx.
func (s *Server) Stop(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// RedisCheck pings Redis.
func RedisCheck(rc redis.UniversalClient) Check {
	return func(ctx context.Context) error { return rc.Ping(ctx).Err() }
}

// PostgresCheck pings PostgreSQL.
func PostgresCheck(db *gorm.DB) Check {
	return func(ctx context.Context) error {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		return sqlDB.PingContext(ctx)
	}
}

// SQSCheck asks SQS for one attribute of the queue.
func SQSCheck(c *sqs.Client, queueURL string) Check {
	return func(ctx context.Context) error {
		_, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(queueURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout},
		})
		return err
	}
}
