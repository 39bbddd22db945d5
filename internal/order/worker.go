package order

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
)

// FullBackoffDefault is how long a message waits before SQS redelivers it when its
// entity's wait list is full.
const FullBackoffDefault = 5 * time.Second

// Defaults of the order-worker's consumer, results publisher and turns (the binary's
// JUNBAN_* variables take them; docs/configuration.md quotes them). The other defaults the
// order-worker passes on are those of the packages it passes them to (lockhandoff,
// queue, ledger, this package's Config).
const (
	// ConcurrencyDefault is how many order events are handled at once. A handler mostly
	// waits (Redis round trips, the results' send and the message's delete), so many are
	// needed to keep two cores busy (docs/performance.md, "Decisions kept").
	ConcurrencyDefault = 128
	// ReceiversDefault is how many SQS receives the consumer keeps in flight.
	ReceiversDefault = 4
	// ReceiveFillDefault is how long a receive waits for more free handlers when all but a
	// few are busy, so that it asks for ten messages rather than one or two.
	ReceiveFillDefault = 20 * time.Millisecond
	// ResultsLingerDefault is how long a batch of results waits for more before it is
	// sent: fuller SendMessageBatch calls (docs/performance.md, "Decisions kept").
	ResultsLingerDefault = 8 * time.Millisecond
	// DetachedTurnsDefault is how many turns may go on in the background after the message
	// that took them was handled (lockhandoff.Config.Detached, whose zero is off).
	DetachedTurnsDefault = 128
	// PGMaxConnsDefault bounds the order-worker's PostgreSQL connections (SKU and order
	// loads on a cold Redis).
	PGMaxConnsDefault = 8
)

// Turns is what the worker needs of lockhandoff.
type Turns interface {
	Submit(ctx context.Context, entity string, envelope []byte) (lockhandoff.Outcome, error)
	Resume(ctx context.Context, entity string) error
}

// Worker turns SQS messages of the orders queue into submissions to the entity's
// turn: an invalid message goes to the DLQ with its reason, a valid one is deleted
// once Redis holds it (queued, or applied in our own turn). A message may carry its event
// in an SNS notification or an EventBridge event (domain.Unwrap): the turn gets the event
// alone, the DLQ a refused message as it came.
type Worker struct {
	Turns Turns
	// MaxEventBytes bounds a message as SQS gives it, envelope included. Default
	// domain.MaxEventBytes.
	MaxEventBytes int
	// MaxLines bounds an order event's lines (Limits.MaxLines); beyond it the message
	// goes to the DLQ with ReasonTooManyLines. Default MaxLinesDefault.
	MaxLines int
	// FullBackoff is how long a message waits when its entity's wait list is full.
	// Default FullBackoffDefault.
	FullBackoff time.Duration
	// Metrics counts the messages by envelope; nil counts nothing.
	Metrics *WorkerMetrics
	Log     *zap.Logger
	// Queue, when set, is the name of the orders queue: Handle starts each message's
	// process span (queue.StartProcess), from the message's attributes or, for an SNS
	// notification, the trace context in its MessageAttributes, once it unwrapped the
	// message (the consumer's SpanInHandler). Empty: the consumer starts it.
	Queue string
}

// Handle is the queue.Handler of the orders queue.
func (w *Worker) Handle(ctx context.Context, m queue.Message) (out queue.Outcome) {
	inner, env, err := domain.Unwrap(m.Body, w.MaxEventBytes)
	if w.Queue != "" {
		var span trace.Span
		ctx, span = queue.StartProcess(ctx, w.Queue, m, snsTraceContext(env, err))
		defer func() { queue.EndProcess(span, out) }()
	}
	w.Metrics.count(env.Kind)
	var ev domain.Event
	if err == nil {
		ev, err = domain.DecodeLimits(inner, domain.Limits{MaxBytes: w.MaxEventBytes, MaxLines: cmp.Or(w.MaxLines, domain.MaxLinesDefault)})
	}
	log := w.Log.WithLazy(tracing.LogFields(ctx)...)
	if err != nil {
		log.Info("invalid order event", append(envelopeFields(env), zap.String("message_id", m.ID), zap.Error(err))...)
		return queue.Outcome{Verdict: queue.Poison, Reason: err.Error()}
	}
	log = log.WithLazy(zap.String("event_id", ev.EventID), zap.String("entity", ev.Entity()))
	if ev.Kind().Origin == domain.Own {
		err := &domain.InvalidError{Reason: domain.ReasonJunbanEvent,
			Detail: string(ev.Type) + " is junban's own: the order-worker submits it into the turn itself; a message cannot"}
		log.Info("invalid order event", append(envelopeFields(env), zap.String("message_id", m.ID), zap.Error(err))...)
		return queue.Outcome{Verdict: queue.Poison, Reason: err.Error()}
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("junban.event_id", ev.EventID), attribute.String("junban.event_type", string(ev.Type)),
			attribute.String("junban.entity", ev.Entity()), attribute.String("junban.envelope", string(env.Kind)))
	}
	if env.Kind != domain.EnvelopeRaw {
		log.Debug("order event unwrapped", append(envelopeFields(env), zap.String("message_id", m.ID))...)
	}
	if ev.Kind().Origin == domain.Nudge {
		if err := w.Turns.Resume(ctx, ev.DrainOf()); err != nil {
			return queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
		}
		return queue.Outcome{Verdict: queue.Done}
	}
	_, err = w.Turns.Submit(ctx, ev.Entity(), stamp(ctx, ev, inner, cmp.Or(w.MaxEventBytes, domain.MaxEventBytes)))
	switch {
	case errors.Is(err, lockhandoff.ErrQueueFull):
		after := w.FullBackoff
		if after <= 0 {
			after = FullBackoffDefault
		}
		return queue.Outcome{Verdict: queue.Retry, Reason: "wait list full", After: after}
	case err != nil:
		log.Warn("submit failed", zap.Error(err))
		return queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
	}
	return queue.Outcome{Verdict: queue.Done}
}

// envelopeFields are the log fields of a message's envelope: its kind, and SNS's or
// EventBridge's ids, each cut to its bound (a sender writes them).
func envelopeFields(env domain.Envelope) []zap.Field {
	env = env.Logged()
	f := []zap.Field{zap.String("envelope", string(env.Kind))}
	switch env.Kind {
	case domain.EnvelopeSNS:
		f = append(f, zap.String("sns_message_id", env.ID), zap.String("topic_arn", env.TopicArn))
	case domain.EnvelopeEventBridge:
		f = append(f, zap.String("eventbridge_id", env.ID), zap.String("source", env.Source), zap.String("detail_type", env.DetailType))
	}
	return f
}

// WorkerMetrics are the Worker's metrics: junban_order_envelopes_total.
type WorkerMetrics struct {
	envelopes map[domain.EnvelopeKind]prometheus.Counter
}

// NewWorkerMetrics registers the Worker's metrics with reg.
func NewWorkerMetrics(reg prometheus.Registerer) (*WorkerMetrics, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "junban", Subsystem: "order", Name: "envelopes_total",
		Help: "Messages of the orders queue by envelope: raw (a junban event), sns (an SNS notification), eventbridge (an EventBridge event), unknown (refused before an envelope was recognised: too large, not a JSON object, or of no known shape).",
	}, []string{"envelope"})
	if err := reg.Register(vec); err != nil {
		return nil, err
	}
	m := &WorkerMetrics{envelopes: map[domain.EnvelopeKind]prometheus.Counter{}}
	// Every label from the start, so that a rate over sns is 0, not absent, before the
	// first notification.
	for _, k := range domain.EnvelopeKinds() {
		m.envelopes[k] = vec.WithLabelValues(string(k))
	}
	return m, nil
}

func (m *WorkerMetrics) count(k domain.EnvelopeKind) {
	if m == nil {
		return
	}
	if c, ok := m.envelopes[k]; ok {
		c.Inc()
	}
}

// DrainMessage is the nudge a holder sends when it leaves a turn with a backlog.
func DrainMessage(entity string) ([]byte, error) {
	return json.Marshal(event.Order{
		EventID:    "drain_" + uuid.NewString(),
		Type:       event.Drain,
		LCID:       entity,
		OccurredAt: time.Now().UTC(),
	})
}

// Nudger returns lockhandoff's Nudge hook: a drain message on the orders queue.
func Nudger(pub interface {
	Publish(ctx context.Context, body []byte, attrs map[string]string) error
}) func(ctx context.Context, entity string) error {
	return func(ctx context.Context, entity string) error {
		body, err := DrainMessage(entity)
		if err != nil {
			return err
		}
		if err := pub.Publish(ctx, body, nil); err != nil {
			return fmt.Errorf("order: nudge %s: %w", entity, err)
		}
		return nil
	}
}
