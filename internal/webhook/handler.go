package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/idempotency"
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
	// Error is a stable code: unknown_provider, too_large, unreadable_body,
	// bad_signature, invalid_payload, in_progress, payload_mismatch, unavailable, busy.
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
	// MaxInFlight bounds the deliveries handled at once; beyond it a delivery gets 503
	// with Retry-After at once, before its body is read. Default MaxInFlightDefault.
	MaxInFlight int
	// Now is the clock signatures are checked against. Default time.Now.
	Now func() time.Time
	// Logger; default none.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Handler serves POST /webhooks/{provider}: size limit, signature, payload, dedup,
// publish, answer. It is safe for concurrent use.
type Handler struct {
	cfg       HandlerConfig
	providers map[string]Provider
	// slots holds one token per delivery in flight (MaxInFlight in all).
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
	if cfg.MaxBodyBytes < 0 || cfg.Tolerance < 0 || cfg.PublishTimeout < 0 || cfg.MaxInFlight < 0 {
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
}

func errorReply(code int, errCode, detail string) reply {
	b, _ := json.Marshal(ErrorAnswer{Error: errCode, Detail: detail})
	return reply{code: code, body: append(b, '\n')}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := r.PathValue("provider")
	p, ok := h.providers[name]
	if !ok {
		// Any path value would do as a label; only configured names become one.
		name = "unknown"
	}
	var rep reply
	select {
	case h.slots <- struct{}{}:
		h.m.inFlight.Inc()
		defer func() {
			<-h.slots
			h.m.inFlight.Dec()
		}()
		if ok {
			rep = h.handle(w, r, p)
		} else {
			rep = errorReply(http.StatusNotFound, "unknown_provider", "")
		}
	default:
		// Refused before anything is read: a burst of large bodies, signed or not, holds
		// at most MaxInFlight of them in memory. Closing the connection keeps net/http
		// from reading what is left of the body (up to 256 KiB) before it answers.
		h.m.busy.Inc()
		rep = errorReply(http.StatusServiceUnavailable, "busy", "too many deliveries in flight")
		rep.retryAfter = BusyRetryAfter
		w.Header().Set("Connection", "close")
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if rep.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(rep.retryAfter.Seconds()))))
	}
	w.WriteHeader(rep.code)
	w.Write(rep.body)
	h.m.requests.WithLabelValues(name, strconv.Itoa(rep.code)).Inc()
	h.m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if rep.replayed {
		h.m.replays.WithLabelValues(name).Inc()
	}
}

func (h *Handler) handle(w http.ResponseWriter, r *http.Request, p Provider) reply {
	log := h.log.With(zap.String("provider", p.Name))
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return errorReply(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the limit is %d bytes", h.cfg.MaxBodyBytes))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errorReply(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the limit is %d bytes", h.cfg.MaxBodyBytes))
		}
		return errorReply(http.StatusBadRequest, "unreadable_body", "")
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
	log = log.With(zap.String("provider_event_id", ev.ID))
	order, ignore := Map(p.Name, p.Kind, ev)
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
	log.Debug("webhook handled", zap.String("outcome", ans.Outcome), zap.String("event_id", ans.EventID))
	return reply{code: http.StatusOK, body: resp}
}

type metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	published *prometheus.CounterVec
	replays   *prometheus.CounterVec
	inFlight  prometheus.Gauge
	busy      prometheus.Counter
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
			Help: "Deliveries being handled now (at most JUNBAN_WEBHOOK_MAX_IN_FLIGHT).",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "webhook", Name: "busy_refusals_total",
			Help: "Deliveries refused with 503 and Retry-After, before their body was read, because JUNBAN_WEBHOOK_MAX_IN_FLIGHT were in flight.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.published, m.replays, m.inFlight, m.busy)
	}
	return m
}
