// Package api serves junban's read side over HTTP (junban-api): stock and availability
// from the ledger, orders with their timeline and turn, the outbound events, stuck turns,
// and the dead-letter queues, with bearer tokens of two scopes and RFC 9457 problem
// details for every error. openapi.json describes every endpoint.
package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/junban/junban/internal/platform/tracing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/config"
)

// Deps are what the API reads from and acts on.
type Deps struct {
	Redis  redis.UniversalClient
	Prefix string
	// Ledger reads stock and availability (it loads a SKU from PostgreSQL on first use,
	// as an allocation does).
	Ledger *ledger.Ledger
	// DB holds the timeline, the order list and SKUs not loaded into Redis yet.
	DB *gorm.DB
	// SQS and Queues reach the dead-letter queues; nil SQS: the DLQ endpoints answer 503.
	SQS    *sqs.Client
	Queues config.SQS
	// Nudge wakes a worker for an entity after a skip (intake.Nudger).
	Nudge func(ctx context.Context, entity string) error
	// IndexShards is the order-workers' backlog index shard count (0: the default).
	IndexShards int
	// Now is the clock of the stuck-turn ages; nil: time.Now.
	Now func() time.Time
	// TraceURL is JUNBAN_TRACE_URL: the timeline links each event's trace with it.
	TraceURL string
}

// Options are the API's bounds and tokens (Config's values).
type Options struct {
	ReadTokens, AdminTokens []string
	MaxBodyBytes            int64
	RequestTimeout          time.Duration
	MaxCartSKUs             int
	StuckAge                time.Duration
}

// OptionsOf returns the Options of a loaded Config.
func OptionsOf(c Config) Options {
	read, _ := ParseTokens(string(c.ReadTokens))
	admin, _ := ParseTokens(string(c.AdminTokens))
	return Options{ReadTokens: read, AdminTokens: admin, MaxBodyBytes: c.MaxBodyBytes,
		RequestTimeout: c.RequestTimeout, MaxCartSKUs: c.MaxCartSKUs, StuckAge: c.StuckAge}
}

// ServerConfig configures a Server: what it reads from (Deps), its bounds and tokens
// (Options), its Logger and Registerer. It is not Config, which is junban-api's
// environment: OptionsOf turns that into Options.
type ServerConfig struct {
	Deps
	Options
	// Logger logs failed requests and the admin actions; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives the API's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// SetDefaults sets the zero fields that have a default.
func (c *ServerConfig) SetDefaults() {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = MaxBodyBytesDefault
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = RequestTimeoutDefault
	}
	if c.MaxCartSKUs <= 0 {
		c.MaxCartSKUs = MaxCartSKUsDefault
	}
	if c.StuckAge <= 0 {
		c.StuckAge = StuckAgeDefault
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.IndexShards <= 0 {
		c.IndexShards = lockhandoff.IndexShardsDefault
	}
}

// Validate reports the dependencies that are missing, all at once.
func (c ServerConfig) Validate() error {
	var p []error
	if c.Redis == nil {
		p = append(p, errors.New("api: Redis is required"))
	}
	if c.Ledger == nil {
		p = append(p, errors.New("api: Ledger is required"))
	}
	if c.DB == nil {
		p = append(p, errors.New("api: DB is required"))
	}
	return errors.Join(p...)
}

// Server is the API's http.Handler.
type Server struct {
	d    Deps
	o    Options
	log  *zap.Logger
	auth *authenticator
	mux  *http.ServeMux
	// traced is mux in a server span per request (OpenTelemetry's net/http
	// instrumentation), continuing the trace a traceparent header names.
	traced http.Handler
	m      *metrics
	// avail keeps availability answers by SKU version (GET /v1/skus/{sku}/availability).
	avail *availCache
}

type metrics struct {
	requests  *prometheus.CounterVec
	seconds   *prometheus.HistogramVec
	availHits prometheus.Counter
}

// New returns the API, or an error naming what cfg lacks.
func New(cfg ServerConfig) (*Server, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, o := cfg.Deps, cfg.Options
	s := &Server{d: d, o: o, log: cfg.Logger, auth: newAuthenticator(o.ReadTokens, o.AdminTokens), mux: http.NewServeMux(), avail: newAvailCache()}
	s.traced = traceRequests(s.mux)
	s.m = &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "junban_api_requests_total", Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "junban_api_request_seconds", Help: "API request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route"}),
		availHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "junban_api_availability_cached_total",
			Help: "Availability answers served from the answer the script gave at the SKU's current version.",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.m.requests, s.m.seconds, s.m.availHits} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("api: metrics: %w", err)
			}
		}
	}
	s.route("/openapi.json", map[string]handler{"GET": {ScopeNone, s.getOpenAPI}})
	s.route("/v1/skus/{sku}", map[string]handler{"GET": {ScopeRead, s.getSKU}})
	s.route("/v1/skus/{sku}/queue", map[string]handler{"GET": {ScopeRead, s.getQueue}})
	s.route("/v1/skus/{sku}/availability", map[string]handler{"GET": {ScopeRead, s.getAvailability}})
	s.route("/v1/availability", map[string]handler{"POST": {ScopeRead, s.postAvailability}})
	s.route("/v1/orders", map[string]handler{"GET": {ScopeRead, s.listOrders}})
	s.route("/v1/orders/{lcid}", map[string]handler{"GET": {ScopeRead, s.getOrder}})
	s.route("/v1/holds", map[string]handler{"GET": {ScopeRead, s.listHolds}})
	s.route("/v1/events", map[string]handler{"GET": {ScopeRead, s.listEvents}})
	s.route("/v1/turns/stuck", map[string]handler{"GET": {ScopeRead, s.stuckTurns}})
	s.route("/v1/turns/{lcid}/skip", map[string]handler{"POST": {ScopeAdmin, s.skipTurn}})
	s.route("/v1/dlq/{queue}", map[string]handler{"GET": {ScopeAdmin, s.listDLQ}})
	s.route("/v1/dlq/{queue}/redrive", map[string]handler{"POST": {ScopeAdmin, s.redriveDLQ}})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, ProblemNotFound, "no such endpoint: see /openapi.json", "")
	})
	return s, nil
}

type handler struct {
	scope Scope
	fn    func(w http.ResponseWriter, r *http.Request) error
}

// route serves pattern with one handler per method; other methods get 405 as a problem.
func (s *Server) route(pattern string, methods map[string]handler) {
	allow := ""
	for m := range methods {
		allow += m
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.m.requests.WithLabelValues(pattern, strconv.Itoa(rw.status)).Inc()
			s.m.seconds.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
		}()
		h, ok := methods[r.Method]
		if !ok {
			rw.Header().Set("Allow", allow)
			writeProblem(rw, r, http.StatusMethodNotAllowed, ProblemMethod, r.Method+" is not served here; allowed: "+allow, "")
			return
		}
		if h.scope > ScopeNone {
			sc, given := s.auth.scope(r)
			switch {
			case !given || sc == ScopeNone:
				writeProblem(rw, r, http.StatusUnauthorized, ProblemUnauthorized, "send Authorization: Bearer <token> with a read or admin token", "")
				return
			case sc < h.scope:
				writeProblem(rw, r, http.StatusForbidden, ProblemForbidden, "this endpoint needs an admin token", "")
				return
			}
		}
		// Every path id before any lookup: a NUL or invalid UTF-8 would reach PostgreSQL
		// as an error (503 and a warning), and a 60 KB one every lookup.
		if err := checkPathIDs(pattern, r.PathValue); err != nil {
			s.fail(rw, r, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.o.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		if r.Body != nil {
			r.Body = http.MaxBytesReader(rw, r.Body, s.o.MaxBodyBytes)
		}
		if err := h.fn(rw, r); err != nil {
			s.fail(rw, r, err)
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.traced.ServeHTTP(w, r) }

// traceRequests wraps mux in a server span per request, named by its route pattern.
func traceRequests(mux http.Handler) http.Handler {
	return otelhttp.NewHandler(mux, "junban-api",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			switch {
			case r.Pattern == "":
				return r.Method
			case strings.Contains(r.Pattern, " "):
				return r.Pattern
			}
			return r.Method + " " + r.Pattern
		}))
}

// apiError is an error with the answer it deserves.
type apiError struct {
	status      int
	typ, reason string
	detail      string
}

func (e *apiError) Error() string { return e.detail }

func badRequest(format string, a ...any) error {
	return &apiError{status: http.StatusBadRequest, typ: ProblemInvalid, detail: fmt.Sprintf(format, a...)}
}

func notFound(reason, format string, a ...any) error {
	return &apiError{status: http.StatusNotFound, typ: ProblemNotFound, reason: reason, detail: fmt.Sprintf(format, a...)}
}

// fail answers err as a problem: the API's own errors as they say, the ledger's request
// errors as 400, a timeout or a backing service as 503, anything else as 500 (logged,
// its text not shown: it may name hosts).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		writeProblem(w, r, ae.status, ae.typ, ae.detail, ae.reason)
	case errors.As(err, &mbe):
		writeProblem(w, r, http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("the body exceeds %d bytes", mbe.Limit), "")
	case errors.Is(err, stock.ErrInvalidRequest), errors.Is(err, stock.ErrInvalidQuantity), errors.Is(err, lockhandoff.ErrInvalidEntity):
		writeProblem(w, r, http.StatusBadRequest, ProblemInvalid, err.Error(), stock.Reason(err))
	case errors.Is(err, stock.ErrUnknownSKU):
		writeProblem(w, r, http.StatusNotFound, ProblemNotFound, "no such SKU", "ERR_UNKNOWN_SKU")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeProblem(w, r, http.StatusServiceUnavailable, ProblemUnavailable, fmt.Sprintf("the request did not finish within %v", s.o.RequestTimeout), "")
	default:
		s.log.Warn("api: request failed", append(tracing.LogFields(r.Context()), zap.String("path", r.URL.Path), zap.Error(err))...)
		writeProblem(w, r, http.StatusServiceUnavailable, ProblemUnavailable, "Redis, PostgreSQL or SQS failed; the log has the error", "")
	}
}

// dlqURLName returns the configured dead-letter queue that name (a queue name, the
// last part of a URL) stands for: the API reaches no other queue.
func (s *Server) dlqByName(name string) (string, bool) {
	for _, q := range []string{s.d.Queues.OrdersDLQ, s.d.Queues.ResultsDLQ} {
		if q != "" && (q == name || path.Base(q) == name) {
			return q, true
		}
	}
	return "", false
}
