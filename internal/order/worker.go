package order

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
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
	// waits (about six Redis round trips, the results' send and the message's delete), so
	// many are needed to keep two cores busy: 16 capped a worker at about 400 events/s
	// (docs/benchmarks.md, "bench e2e").
	ConcurrencyDefault = 128
	// ReceiversDefault is how many SQS receives the consumer keeps in flight.
	ReceiversDefault = 4
	// ReceiveFillDefault is how long a receive waits for more free handlers when all but a
	// few are busy, so that it asks for ten messages rather than one or two.
	ReceiveFillDefault = 20 * time.Millisecond
	// ResultsLingerDefault is how long a batch of results waits for more before it is
	// sent: fuller SendMessageBatch calls (docs/benchmarks.md, "bench e2e").
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
// once Redis holds it (queued, or applied in our own turn).
type Worker struct {
	Turns         Turns
	MaxEventBytes int
	// MaxLines bounds an order event's lines (Limits.MaxLines); beyond it the message
	// goes to the DLQ with ReasonTooManyLines. Default MaxLinesDefault.
	MaxLines    int
	FullBackoff time.Duration
	Log         *zap.Logger
}

// Handle is the queue.Handler of the orders queue.
func (w *Worker) Handle(ctx context.Context, m queue.Message) queue.Outcome {
	ev, err := domain.DecodeLimits(m.Body, domain.Limits{MaxBytes: w.MaxEventBytes, MaxLines: cmp.Or(w.MaxLines, domain.MaxLinesDefault)})
	if err != nil {
		w.Log.Info("invalid order event", zap.String("message_id", m.ID), zap.Error(err))
		return queue.Outcome{Verdict: queue.Poison, Reason: err.Error()}
	}
	if ev.Type == event.Drain {
		if err := w.Turns.Resume(ctx, ev.DrainOf()); err != nil {
			return queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
		}
		return queue.Outcome{Verdict: queue.Done}
	}
	_, err = w.Turns.Submit(ctx, ev.Entity(), m.Body)
	switch {
	case errors.Is(err, lockhandoff.ErrQueueFull):
		after := w.FullBackoff
		if after <= 0 {
			after = FullBackoffDefault
		}
		return queue.Outcome{Verdict: queue.Retry, Reason: "wait list full", After: after}
	case err != nil:
		w.Log.Warn("submit failed", zap.String("event_id", ev.EventID), zap.String("entity", ev.Entity()), zap.Error(err))
		return queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
	}
	return queue.Outcome{Verdict: queue.Done}
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
