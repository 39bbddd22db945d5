package persist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/queue"
)

// Handler defaults.
const (
	// RetryBaseDefault is the pause after the first failed attempt of a batch.
	RetryBaseDefault = 500 * time.Millisecond
	// RetryMaxDefault caps the pause between attempts.
	RetryMaxDefault = 15 * time.Second
	// HoldMaxDefault is how long a failing batch is held and retried before it goes back
	// to SQS.
	HoldMaxDefault = 10 * time.Minute
	// AttemptTimeoutDefault bounds one Apply, so a PostgreSQL that stopped answering
	// (rather than refusing) is noticed.
	AttemptTimeoutDefault = 30 * time.Second
)

// Defaults of the persist-worker's consumer (the binary's JUNBAN_PERSIST_* variables take
// them, with the Handler defaults above).
const (
	// BatchMaxDefault is the most results applied in one transaction.
	BatchMaxDefault = 100
	// BatchWindowDefault is how long a batch keeps collecting after its first message.
	BatchWindowDefault = 100 * time.Millisecond
	// ReceiversDefault is how many receives from the results queue stay in flight: the
	// receive rate grows with the receivers, not with the PostgreSQL connections.
	ReceiversDefault = 16
	// ReceiveLingerDefault is the persist-worker's JUNBAN_SQS_RECEIVE_LINGER default,
	// twice the order-worker's (queue.ReceiveLingerDefault): a result waits for its batch
	// window anyway, and the longer linger brings more results a receive
	// (docs/performance.md, "Decisions kept").
	ReceiveLingerDefault = 40 * time.Millisecond
	// ConcurrencyDefault is how many batches per receiver may be handed over at once.
	ConcurrencyDefault = 1
	// AppliersDefault is how many batches are applied at once (PostgreSQL connections).
	AppliersDefault = 4
	// VisibilityDefault is the visibility timeout asked for on every receive.
	VisibilityDefault = 30 * time.Second
)

// HandlerConfig configures a Handler. Zero values stand for the defaults.
type HandlerConfig struct {
	// DB is where results go (required).
	DB *gorm.DB
	// Logger logs failures, recoveries and poison results; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives the batch sizes, durations, lag and skips (Metrics); nil
	// registers none.
	Registerer prometheus.Registerer
	// RetryBase is the pause after a batch's first failed attempt; it doubles with
	// every attempt, with jitter. Default RetryBaseDefault.
	RetryBase time.Duration
	// RetryMax caps the pause. Default RetryMaxDefault.
	RetryMax time.Duration
	// HoldMax is how long a batch that PostgreSQL cannot take is held (the consumer keeps
	// its messages invisible) and retried before it is handed back to SQS as Retry.
	// Holding rather than handing back keeps an outage from spending the messages'
	// receive count (maxReceiveCount) and sending good results to the DLQ.
	// Default HoldMaxDefault.
	HoldMax time.Duration
	// AttemptTimeout bounds one Apply. Default AttemptTimeoutDefault.
	AttemptTimeout time.Duration
	// Quit, when closed, makes a failing batch go back to SQS at once instead of being
	// held: close it when shutdown starts.
	Quit <-chan struct{}
	// Appliers, when positive, bounds how many Apply calls (PostgreSQL transactions) run
	// at once, over every HandleBatch call: many receive loops can then share a few
	// connections. A batch waits for a free applier (bounded by AttemptTimeout); a held
	// batch does not keep one while it pauses between attempts. 0: no bound (every
	// HandleBatch call applies at once, as many connections as the pool gives).
	Appliers int
	// Outbound, when set, writes the outbound events of every batch into the outbox, in
	// the batch's transaction (WithOutbound). nil: no outbox.
	Outbound *outbound.Writer
	// OutboxWritten, when set, is called after a batch that wrote outbox rows committed
	// (the relay's wake-up). It must not block.
	OutboxWritten func()
}

// Handler applies batches of results-queue messages: a queue.BatchHandler.
type Handler struct {
	cfg HandlerConfig
	log *zap.Logger
	m   *Metrics

	slots chan struct{} // one token per Apply in flight; nil: no bound

	mu       sync.Mutex
	failures int   // consecutive failed attempts, over every batch
	lastErr  error // of the last failed attempt
}

// SetDefaults sets the zero fields that have a default.
func (cfg *HandlerConfig) SetDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = RetryBaseDefault
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = RetryMaxDefault
	}
	if cfg.HoldMax <= 0 {
		cfg.HoldMax = HoldMaxDefault
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = AttemptTimeoutDefault
	}
}

// Validate reports what is missing or wrong, every problem at once.
func (cfg HandlerConfig) Validate() error {
	var p []error
	if cfg.DB == nil {
		p = append(p, errors.New("persist: handler: DB is required"))
	}
	if cfg.Appliers < 0 {
		p = append(p, errors.New("persist: handler: negative Appliers"))
	}
	return errors.Join(p...)
}

// NewHandler returns a Handler for cfg, or an error naming what cfg lacks.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, m: m}
	if cfg.Appliers > 0 {
		h.slots = make(chan struct{}, cfg.Appliers)
	}
	return h, nil
}

// apply runs one attempt: it waits for a free applier (within the attempt's timeout)
// and applies the batch in one transaction; took is the time of the transaction alone.
func (h *Handler) apply(ctx context.Context, results []event.Result) (rep Report, took time.Duration, err error) {
	actx, cancel := context.WithTimeout(ctx, h.cfg.AttemptTimeout)
	defer cancel()
	if h.slots != nil {
		select {
		case h.slots <- struct{}{}:
			defer func() { <-h.slots }()
		case <-actx.Done():
			return Report{Results: make([]ResultReport, len(results))}, 0, fmt.Errorf("persist: waiting for a free applier: %w", actx.Err())
		}
	}
	// One span per PostgreSQL transaction, a child of the batch's span (which links each
	// result's trace).
	actx, span := tracing.Tracer().Start(actx, "apply batch", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.DBSystemNamePostgreSQL, attribute.Int("junban.results", len(results))))
	start := time.Now()
	rep, err = Apply(actx, h.cfg.DB, results, WithOutbound(h.cfg.Outbound))
	took = time.Since(start)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("junban.applied", rep.Count(Applied)), attribute.Int("junban.duplicates", rep.Count(Duplicate)),
			attribute.Int("junban.poison", rep.Count(Poison)), attribute.Int("junban.outbound", rep.Outbound))
	}
	tracing.End(span, err)
	return rep, took, err
}

// Ready fails while the last attempt to apply a batch failed: PostgreSQL is out of reach
// (or refuses every batch) and results are piling up in SQS.
func (h *Handler) Ready(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failures > 0 {
		return fmt.Errorf("persist: %d attempt(s) in a row failed, last: %v", h.failures, h.lastErr)
	}
	return nil
}

// HandleBatch decodes the messages and applies their results in one transaction. A
// message that is not a result, a result that can never be applied, and a result whose
// entity and event id PostgreSQL holds with another body (Conflict, logged at error) are
// Poison; the others are Done once committed. A move not recorded because moves holds it
// for another result is logged at error; its result is Done. When PostgreSQL fails, the batch is held and retried
// with backoff and jitter; after HoldMax, or on Quit or ctx's end, every message of the
// batch is Retry (nothing was committed, nothing is deleted).
func (h *Handler) HandleBatch(ctx context.Context, ms []queue.Message) []queue.Outcome {
	out := make([]queue.Outcome, len(ms))
	results := make([]event.Result, 0, len(ms))
	at := make([]int, 0, len(ms)) // results[k] came from ms[at[k]]
	for i, m := range ms {
		var r event.Result
		if err := DecodeResult(m.Body, &r); err != nil {
			out[i] = queue.Outcome{Verdict: queue.Poison, Reason: fmt.Sprintf("persist: not a result event: %v", err)}
			h.m.Results.WithLabelValues("poison").Inc()
			h.log.Warn("poison message", append(messageFields(m), zap.Error(err))...)
			continue
		}
		results = append(results, r)
		at = append(at, i)
	}
	if len(results) == 0 {
		return out
	}

	held := time.Now()
	pauses := h.backoff()
	for attempt := 1; ; attempt++ {
		rep, took, err := h.apply(ctx, results)
		if err == nil {
			h.committed(results, rep, took)
			if rep.Outbound > 0 && h.cfg.OutboxWritten != nil {
				h.cfg.OutboxWritten()
			}
			for k, rr := range rep.Results {
				switch rr.Status {
				case Poison:
					out[at[k]] = queue.Outcome{Verdict: queue.Poison, Reason: rr.Err.Error()}
					h.log.Warn("poison result", append(resultFields(ms[at[k]], results[k]), zap.Error(rr.Err))...)
				case Conflict:
					// Not a redelivery: kept in the DLQ for an operator, never deleted unread.
					out[at[k]] = queue.Outcome{Verdict: queue.Poison, Reason: rr.Err.Error()}
					h.log.Error("result conflicts with the persisted result of its entity and event id; dead-lettered",
						append(resultFields(ms[at[k]], results[k]), zap.Error(rr.Err))...)
				default:
					out[at[k]] = queue.Outcome{Verdict: queue.Done}
				}
			}
			for _, c := range rep.MoveConflicts {
				fields := []zap.Field{zap.String("event_id", c.Move.EventID), zap.String("entity", c.Move.Entity)}
				for k, r := range results {
					if r.EventID == c.Move.EventID && r.Entity == c.Move.Entity {
						fields = resultFields(ms[at[k]], r)
					}
				}
				h.log.Error("move not recorded: moves holds it for another result", append(fields,
					zap.String("sku", c.Move.SKU), zap.String("op_id", c.Move.OpID), zap.Int("idx", c.Move.Idx),
					zap.String("stored_event_id", c.Stored.EventID), zap.String("stored_entity", c.Stored.Entity),
					zap.Error(c))...)
			}
			return out
		}

		n := h.failed(err)
		pause := pauses.NextBackOff()
		giveUp := time.Since(held)+pause > h.cfg.HoldMax
		h.log.Warn("apply failed; batch held for a retry", append(tracing.LogFields(ctx), zap.Int("results", len(results)),
			zap.Strings("event_ids", eventIDs(results)), zap.Int("attempt", attempt), zap.Int("failures_in_a_row", n),
			zap.Duration("pause", pause), zap.Bool("hand_back", giveUp), zap.Error(err))...)
		if !giveUp {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
			case <-h.cfg.Quit:
			}
			t.Stop()
		}
		for k := range results {
			out[at[k]] = queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
		}
		return out
	}
}

// messageFields are the log fields of a message of the results queue: its id and the
// trace of the result it carries (the order-worker's send), so that a search by trace id
// finds the persist-worker's lines about it too.
func messageFields(m queue.Message) []zap.Field {
	return append([]zap.Field{zap.String("message_id", m.ID)},
		tracing.LogFields(tracing.Extract(context.Background(), m.Attributes, m.AWSTraceHeader))...)
}

// resultFields are messageFields and the result's event id and entity (an lcid, or
// "sku:" and a SKU).
func resultFields(m queue.Message, r event.Result) []zap.Field {
	return append(messageFields(m), zap.String("event_id", r.EventID), zap.String("entity", r.Entity))
}

// eventIDs are the event ids of a batch's results, for a line about the whole batch.
func eventIDs(results []event.Result) []string {
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.EventID
	}
	return ids
}

// backoff gives the pauses after a batch's failures: RetryBase, doubling, capped at
// RetryMax, with jitter in [50%, 150%] so that replicas do not retry in step.
func (h *Handler) backoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: min(h.cfg.RetryBase, h.cfg.RetryMax), RandomizationFactor: 0.5,
		Multiplier: 2, MaxInterval: h.cfg.RetryMax}
}

func (h *Handler) failed(err error) int {
	h.m.Failures.Inc()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	h.lastErr = err
	return h.failures
}

func (h *Handler) committed(results []event.Result, rep Report, took time.Duration) {
	now := time.Now()
	h.mu.Lock()
	if h.failures > 0 {
		h.log.Info("apply works again", zap.Int("failed_attempts", h.failures))
	}
	h.failures, h.lastErr = 0, nil
	h.mu.Unlock()

	m := h.m
	m.BatchSize.Observe(float64(len(results)))
	m.ApplyDuration.Observe(took.Seconds())
	m.skipped(rep.Skips)
	for k, rr := range rep.Results {
		switch rr.Status {
		case Applied:
			m.Results.WithLabelValues("applied").Inc()
			if !results[k].ProcessedAt.IsZero() {
				m.Lag.Observe(now.Sub(results[k].ProcessedAt).Seconds())
			}
		case Duplicate:
			m.Results.WithLabelValues("duplicate").Inc()
		case Poison:
			m.Results.WithLabelValues("poison").Inc()
		case Conflict:
			m.Results.WithLabelValues("conflict").Inc()
			m.IdentityConflicts.WithLabelValues("inbox").Inc()
		}
	}
	m.IdentityConflicts.WithLabelValues("moves").Add(float64(len(rep.MoveConflicts)))
	m.OutboxRows.Add(float64(rep.Outbound))
}
