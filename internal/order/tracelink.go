package order

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
)

// An event may run in a turn that is not its message's: queued behind the holder, it is
// run by whichever replica holds the turn when its time comes, and parked (a payment
// before its order) it is applied in a later event's step. So that its trace still
// reaches its step, the consumer writes the message's trace context and the time into the
// envelope it submits (Stamp), and the step reads it back (startStep, unparked): the
// event's wait and its step are spans of its own trace, linked to the holder's.

// Stamp returns the envelope to submit for ev: inner with ctx's trace context and the
// time written in, while the process traces; inner as it came otherwise, but for trace
// fields a sender wrote, which are dropped (only the order-worker writes them). A stamp
// that would make the envelope longer than maxBytes is left out.
func Stamp(ctx context.Context, ev domain.Event, inner []byte, maxBytes int) []byte {
	o := ev.Order
	sent := o.TraceParent != "" || o.TraceState != "" || o.QueuedAt != nil
	o.TraceParent, o.TraceState, o.QueuedAt = "", "", nil
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && tracing.Active() {
		carrier := map[string]string{}
		tracing.Inject(ctx, carrier)
		now := time.Now().UTC()
		stamped := o
		stamped.TraceParent, stamped.TraceState, stamped.QueuedAt = carrier[tracing.AttrTraceParent], carrier[tracing.AttrTraceState], &now
		if out, err := json.Marshal(stamped); err == nil && len(out) <= maxBytes {
			return out
		}
	}
	if !sent {
		return inner
	}
	if out, err := json.Marshal(o); err == nil {
		return out
	}
	return inner
}

// queuedContext is the trace context stamped into an event's envelope, with ok false
// when it has none (or a malformed one).
func queuedContext(o event.Order) (trace.SpanContext, bool) {
	if o.TraceParent == "" {
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(tracing.Extract(context.Background(),
		map[string]string{tracing.AttrTraceParent: o.TraceParent, tracing.AttrTraceState: o.TraceState}, ""))
	return sc, sc.IsValid()
}

// waitStart is when an event began to wait: its stamp's time, or now when it has none or
// one from the future (another host's clock).
func waitStart(queuedAt *time.Time, now time.Time) time.Time {
	if queuedAt == nil || queuedAt.After(now) {
		return now
	}
	return *queuedAt
}

// startStep starts the "step" span of an event. An event stepped in its own message's
// span (the submit that took the turn ran it) is its child. An event whose envelope names
// another span (queued, and run in another message's turn) is stepped in its own trace: a
// "wait" span from its queuing to now and the step, both children of the span that queued
// it, linked to the holder's span (ctx's) whose turn ran it. An event without a stamp
// (tracing off when it was submitted) is stepped in ctx's span.
func startStep(ctx context.Context, t lockhandoff.Turn, ev *domain.Event) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("junban.entity", t.Entity), attribute.Int64("junban.turn_seq", t.Seq), attribute.Bool("junban.rerun", t.Rerun)}
	if ev == nil {
		return tracing.Tracer().Start(ctx, "step", trace.WithAttributes(attrs...))
	}
	attrs = append(attrs, attribute.String("junban.event_id", ev.EventID), attribute.String("junban.event_type", string(ev.Type)))
	holder := trace.SpanContextFromContext(ctx)
	queued, ok := queuedContext(ev.Order)
	if !ok || queued.TraceID() == holder.TraceID() && queued.SpanID() == holder.SpanID() {
		return tracing.Tracer().Start(ctx, "step", trace.WithAttributes(attrs...))
	}
	parent := trace.ContextWithRemoteSpanContext(ctx, queued)
	var links []trace.Link
	if holder.IsValid() {
		links = append(links, trace.Link{SpanContext: holder, Attributes: []attribute.KeyValue{attribute.String("junban.link", "turn holder")}})
	}
	now := time.Now()
	_, wait := tracing.Tracer().Start(parent, "wait", trace.WithTimestamp(waitStart(ev.QueuedAt, now)),
		trace.WithAttributes(attrs[0], attrs[3]), trace.WithLinks(links...))
	wait.End(trace.WithTimestamp(now))
	return tracing.Tracer().Start(parent, "step", trace.WithTimestamp(now), trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// traceResults names in each result the trace it belongs to: the step's, or, for a
// parked event the step applied, its own (stamped when it was submitted), where a
// "parked" span from its parking to now shows its wait, linked to the step. A result
// names only a trace junban's own span records and samples: none for an unsampled trace,
// and none while the process does not trace (a no-op span carries whatever trace its
// context held, a sender's say).
func traceResults(ctx context.Context, step trace.Span, parked []domain.Parked, ev domain.Event, results []event.Result) {
	stepTrace := ""
	if sc := step.SpanContext(); step.IsRecording() && sc.IsValid() && sc.IsSampled() {
		stepTrace = sc.TraceID().String()
	}
	for i := range results {
		results[i].TraceID = stepTrace
		if results[i].EventID == ev.EventID || !tracing.Active() {
			continue
		}
		if tid, ok := unparked(ctx, step, parked, results[i]); ok {
			results[i].TraceID = tid
		}
	}
}

// unparked records the wait of the parked event whose result r is in its own trace,
// and returns that trace's id ("" when it is not sampled); ok is false when the event
// carries no trace context (it is then the step's).
func unparked(ctx context.Context, step trace.Span, parked []domain.Parked, r event.Result) (string, bool) {
	for _, p := range parked {
		if p.EventID() != r.EventID {
			continue
		}
		var o event.Order
		if err := json.Unmarshal(p.Body, &o); err != nil {
			return "", false
		}
		sc, ok := queuedContext(o)
		if !ok {
			return "", false
		}
		now := time.Now()
		_, span := tracing.Tracer().Start(trace.ContextWithRemoteSpanContext(ctx, sc), "parked",
			trace.WithTimestamp(waitStart(&p.ParkedAt, now)),
			trace.WithLinks(trace.Link{SpanContext: step.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("junban.link", "applied in step")}}),
			trace.WithAttributes(attribute.String("junban.entity", r.Entity), attribute.String("junban.event_id", r.EventID),
				attribute.String("junban.outcome", r.Outcome), attribute.String("junban.reason", r.Reason)))
		own := span.SpanContext()
		recorded := span.IsRecording() && own.IsSampled()
		span.End(trace.WithTimestamp(now))
		if !recorded {
			return "", true
		}
		return own.TraceID().String(), true
	}
	return "", false
}
