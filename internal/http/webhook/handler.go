package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/redis/idempotency"
)

// Pattern is the route of the webhook handler.
const Pattern = "POST /webhooks/{provider}"

// BusyRetryAfter is the Retry-After of a delivery refused because MaxInFlight deliveries
// were in flight.
const BusyRetryAfter = time.Second

// HeaderReplayed is set to "true" on the answer of a completed duplicate: the body is
// the first delivery's answer, byte for byte.
const HeaderReplayed = "Idempotent-Replayed"

// Outcomes of a 200 answer.
const (
	// OutcomeAccepted: the order event was published (its event_id is in the answer).
	OutcomeAccepted = "accepted"
	// OutcomeIgnored: the event was acknowledged without an order event (see reason).
	OutcomeIgnored = "ignored"
)

// Answer is the body of a 200 answer.
type Answer struct {
	Outcome         string `json:"outcome"`
	Provider        string `json:"provider"`
	ProviderEventID string `json:"provider_event_id"`
	ProviderType    string `json:"provider_type"`
	// EventID, Type and LCID describe the published order event.
	EventID string `json:"event_id,omitempty"`
	Type    string `json:"type,omitempty"`
	LCID    string `json:"lcid,omitempty"`
	// Reason says why an event was ignored.
	Reason string `json:"reason,omitempty"`
}

// ErrorAnswer is the body of every other answer.
type ErrorAnswer struct {
	// Error is a stable code: unknown_provider, too_large, body_timeout, unreadable_body,
	// bad_signature, invalid_payload, busy, in_progress, payload_mismatch, unavailable.
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// HandlerConfig configures a Handler. Zero values stand for the defaults.
type HandlerConfig struct {
	// Providers accepted under /webhooks/{name} (required).
	Providers []Provider
	// Guard dedups by provider event id (required).
	Guard *idempotency.Guard
	// Publisher sends order events to the orders queue (required).
	Publisher Publisher
	// MaxBodyBytes bounds a body. Default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// Tolerance of signature timestamps, either way. Default ToleranceDefault.
	Tolerance time.Duration
	// PublishTimeout bounds one send to SQS. Default PublishTimeoutDefault.
	PublishTimeout time.Duration
	// BodyReadTimeout bounds reading a body, from the handler's start; a body not in by
	// then gets 408. Default BodyReadTimeoutDefault.
	BodyReadTimeout time.Duration
	// MaxInFlight bounds the signed, valid deliveries in their Redis and SQS work at once;
	// beyond it a delivery gets 503 with Retry-After at once. Default MaxInFlightDefault.
	MaxInFlight int
	// Now is the clock signatures are checked against. Default time.Now.
	Now func() time.Time
	// Logger; default none.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Handler serves POST /webhooks/{provider}: size limit, body read deadline, signature,
// payload, in-flight bound, dedup, publish, answer. It is safe for concurrent use.
type Handler struct {
	cfg       HandlerConfig
	providers map[string]Provider
	// slots holds one token per signed delivery in its Redis and SQS work (MaxInFlight
	// in all).
	slots chan struct{}
	log   *zap.Logger
	m     *metrics
}

// NewHandler checks cfg and returns a Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	var errs []error
	if len(cfg.Providers) == 0 {
		errs = append(errs, errors.New("no provider"))
	}
	if cfg.Guard == nil {
		errs = append(errs, errors.New("no idempotency guard"))
	}
	if cfg.Publisher == nil {
		errs = append(errs, errors.New("no publisher"))
	}
	if cfg.MaxBodyBytes < 0 || cfg.Tolerance < 0 || cfg.PublishTimeout < 0 || cfg.MaxInFlight < 0 || cfg.BodyReadTimeout < 0 {
		errs = append(errs, errors.New("negative limit"))
	}
	// Defaults first: the lock TTL check below must see the publish timeout that will run.
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = MaxBodyBytesDefault
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = ToleranceDefault
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = PublishTimeoutDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = MaxInFlightDefault
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = BodyReadTimeoutDefault
	}
	h := &Handler{cfg: cfg, providers: map[string]Provider{}, slots: make(chan struct{}, cfg.MaxInFlight)}
	for _, p := range cfg.Providers {
		if _, dup := h.providers[p.Name]; dup {
			errs = append(errs, fmt.Errorf("provider %q twice", p.Name))
		}
		if len(p.keys) == 0 {
			errs = append(errs, fmt.Errorf("provider %q has no key", p.Name))
		}
		h.providers[p.Name] = p
	}
	if cfg.Guard != nil && cfg.PublishTimeout >= cfg.Guard.LockTTL() {
		errs = append(errs, fmt.Errorf("publish timeout %v is not under the lock TTL %v", cfg.PublishTimeout, cfg.Guard.LockTTL()))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("webhook: handler config: %w", errors.Join(errs...))
	}
	h.log = cfg.Logger
	if h.log == nil {
		h.log = zap.NewNop()
	}
	h.m = newMetrics(cfg.Registerer)
	return h, nil
}

// Register adds the handler to mux under Pattern.
func (h *Handler) Register(mux *http.ServeMux) { mux.Handle(Pattern, h) }

// reply is an answer before it is written.
type reply struct {
	code     int
	body     []byte
	replayed bool
	// retryAfter is set on 409 and on a 503 for too many deliveries in flight.
	retryAfter time.Duration
	// closeConn ends the connection after the answer: the body was not read to its end.
	closeConn bool
}

func errorReply(code int, errCode, detail string) reply {
	b, _ := json.Marshal(ErrorAnswer{Error: errCode, Detail: detail})
	return reply{code: code, body: append(b, '\n')}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := r.PathValue("provider")
	p, ok := h.providers[name]
	var rep reply
	if ok {
		rep = h.handle(w, r, p)
	} else {
		// Any path value would do as a label; only configured names become one.
		name = "unknown"
		rep = errorReply(http.StatusNotFound, "unknown_provider", "")
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if rep.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rep.retryAfter.Seconds()))))
	}
	if rep.closeConn {
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(rep.code)
	w.Write(rep.body)
	h.m.requests.WithLabelValues(name, strconv.Itoa(rep.code)).Inc()
	h.m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if rep.replayed {
		h.m.replays.WithLabelValues(name).Inc()
	}
}

// readBody reads the body within MaxBodyBytes and BodyReadTimeout. The deadline is the
// connection's, so a client that sends slowly is cut off there whatever its pace; the
// read holds no in-flight slot, so slow clients cannot keep signed deliveries out.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *reply) {
	tooLarge := errorReply(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the limit is %d bytes", h.cfg.MaxBodyBytes))
	if r.ContentLength > h.cfg.MaxBodyBytes {
		// Nothing of it is read: the connection goes, or net/http would read the rest.
		tooLarge.closeConn = true
		return nil, &tooLarge
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(h.cfg.BodyReadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.log.Debug("webhook: body read deadline not set", zap.Error(err))
	}
	h.m.reading.Inc()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	h.m.reading.Dec()
	if err == nil {
		// The body is in: the guarded section that follows is bounded by its own
		// timeouts (and the server's WriteTimeout), not by the body's deadline.
		_ = rc.SetReadDeadline(time.Time{})
		return body, nil
	}
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		tooLarge.closeConn = true
		return nil, &tooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.m.bodyTimeouts.Inc()
		rep := errorReply(http.StatusRequestTimeout, "body_timeout", fmt.Sprintf("the body must arrive within %v", h.cfg.BodyReadTimeout))
		rep.closeConn = true
		return nil, &rep
	}
	rep := errorReply(http.StatusBadRequest, "unreadable_body", "")
	rep.closeConn = true
	return nil, &rep
}

// acquire takes an in-flight slot, or answers 503 busy at once.
func (h *Handler) acquire() (release func(), busy *reply) {
	select {
	case h.slots <- struct{}{}:
		h.m.inFlight.Inc()
		return func() {
			<-h.slots
			h.m.inFlight.Dec()
		}, nil
	default:
		h.m.busy.Inc()
		rep := errorReply(http.StatusServiceUnavailable, "busy", "too many deliveries in flight")
		rep.retryAfter = BusyRetryAfter
		return nil, &rep
	}
}

func (h *Handler) handle(w http.ResponseWriter, r *http.Request, p Provider) reply {
	log := h.log.With(append(tracing.LogFields(r.Context()), zap.String("provider", p.Name))...)
	body, bad := h.readBody(w, r)
	if bad != nil {
		return *bad
	}
	signed, err := p.Verify(r.Header, body, h.cfg.Now(), h.cfg.Tolerance)
	if err != nil {
		// The reason stays in the log and out of the answer: a forger learns nothing.
		log.Debug("webhook signature rejected", zap.Error(err))
		return errorReply(http.StatusUnauthorized, "bad_signature", "")
	}
	ev, err := Parse(p.Kind, signed.ID, body)
	if err != nil {
		log.Debug("webhook payload rejected", zap.Error(err))
		return errorReply(http.StatusBadRequest, "invalid_payload", err.Error())
	}
	// Only a signed, valid delivery takes a slot: the slots bound the work on Redis and
	// SQS, not the time clients take to send or the deliveries nobody signed.
	release, busy := h.acquire()
	if busy != nil {
		return *busy
	}
	defer release()
	return h.guarded(r, log, p, ev)
}

// guarded runs a verified delivery's section under its idempotency key: begin, publish,
// complete.
func (h *Handler) guarded(r *http.Request, log *zap.Logger, p Provider, ev ProviderEvent) reply {
	log = log.With(zap.String("provider_event_id", ev.ID))
	order, ignore := Map(p.Name, p.Kind, ev)
	if order != nil {
		log = log.With(zap.String("event_id", order.EventID), zap.String("lcid", order.LCID))
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetAttributes(attribute.String("junban.event_id", order.EventID),
				attribute.String("junban.event_type", string(order.Type)), attribute.String("junban.lcid", order.LCID))
		}
	}
	ans := Answer{Provider: p.Name, ProviderEventID: ev.ID, ProviderType: ev.Type}
	if order != nil {
		ans.Outcome, ans.EventID, ans.Type, ans.LCID = OutcomeAccepted, order.EventID, string(order.Type), order.LCID
	} else {
		ans.Outcome, ans.Reason = OutcomeIgnored, ignore
	}

	// The provider hanging up must not cut the guarded section in half.
	ctx := context.WithoutCancel(r.Context())
	claim, err := h.cfg.Guard.Begin(ctx, p.Name+":"+ev.ID, ev.PayloadHash())
	switch {
	case errors.Is(err, idempotency.ErrPayloadMismatch):
		log.Info("webhook id reused with another payload")
		return errorReply(http.StatusUnprocessableEntity, "payload_mismatch", "this event id was delivered with another payload")
	case errors.Is(err, idempotency.ErrInProgress):
		rep := errorReply(http.StatusConflict, "in_progress", "a delivery of this event is being processed")
		rep.retryAfter = claim.RetryAfter
		return rep
	case err != nil:
		log.Warn("webhook: redis unavailable", zap.Error(err))
		return errorReply(http.StatusServiceUnavailable, "unavailable", "")
	case claim.State == idempotency.StateCompleted:
		return reply{code: http.StatusOK, body: claim.Response, replayed: true}
	}

	if order != nil {
		msg, err := json.Marshal(order)
		if err != nil {
			_ = claim.Release(ctx) // the claim expires by itself; the 500 is the answer
			return errorReply(http.StatusInternalServerError, "internal", "")
		}
		pctx, cancel := context.WithTimeout(ctx, h.cfg.PublishTimeout)
		err = h.cfg.Publisher.Publish(pctx, msg)
		cancel()
		if err != nil {
			log.Warn("webhook: order event not published", zap.String("event_id", order.EventID), zap.Error(err))
			if rerr := claim.Release(ctx); rerr != nil {
				log.Warn("webhook: lock not released, it expires", zap.Error(rerr))
			}
			return errorReply(http.StatusServiceUnavailable, "unavailable", "")
		}
		h.m.published.WithLabelValues(p.Name, string(order.Type)).Inc()
	}
	resp, _ := json.Marshal(ans)
	resp = append(resp, '\n')
	if err := claim.Complete(ctx, resp); err != nil {
		// SQS has the order event: answer 200 so the provider stops. Without the record
		// a later retry may publish the same event id again; the order-worker's
		// done:<event_id> absorbs it.
		log.Warn("webhook: completed record not written", zap.String("event_id", ans.EventID), zap.Error(err))
	}
	log.Info("webhook handled", zap.String("outcome", ans.Outcome))
	return reply{code: http.StatusOK, body: resp}
}

type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	published    *prometheus.CounterVec
	replays      *prometheus.CounterVec
	inFlight     prometheus.Gauge
	busy         prometheus.Counter
	reading      prometheus.Gauge
	bodyTimeouts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "requests_total",
			Help: "Webhook deliveries answered, by provider and HTTP status code.",
		}, []string{"provider", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "request_duration_seconds",
			Help:    "Time to answer a webhook delivery, by provider.",
			Buckets: prometheus.DefBuckets,
		}, []string{"provider"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "order_events_published_total",
			Help: "Order events accepted by SQS, by provider and order event type.",
		}, []string{"provider", "type"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "replays_total",
			Help: "Completed duplicates answered with the first response, by provider.",
		}, []string{"provider"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "in_flight",
			Help: "Signed deliveries in their Redis and SQS work now (at most JUNBAN_WEBHOOK_MAX_IN_FLIGHT).",
		}),
		reading: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "bodies_reading",
			Help: "Request bodies being received now (each for at most JUNBAN_WEBHOOK_BODY_READ_TIMEOUT).",
		}),
		bodyTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "body_timeouts_total",
			Help: "Requests answered 408 because their body did not arrive within JUNBAN_WEBHOOK_BODY_READ_TIMEOUT.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "busy_refusals_total",
			Help: "Signed deliveries refused with 503 and Retry-After, before any Redis or SQS work, because JUNBAN_WEBHOOK_MAX_IN_FLIGHT were in flight.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.published, m.replays, m.inFlight, m.busy, m.reading, m.bodyTimeouts)
	}
	return m
}
