package order_test

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/tracing"
)

// TestStepIsTracedAndItsResultNamesTheTrace: an event submitted inside a span is stepped
// in a "step" span of that trace, with its ledger script, its commit and the results' send
// as children, and its result carries the trace id (the timeline links it).
func TestStepIsTracedAndItsResultNamesTheTrace(t *testing.T) {
	rcv := testenv.StartOTLPReceiver(t)
	rcv.Setenv(t)
	prev := otel.GetTracerProvider()
	shutdown, err := tracing.Setup(context.Background(), "order-worker", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	h := newHarness(t, []ledger.SKU{{SKU: "TR", Lots: []ledger.Lot{onHand("TR1", 1, 10, "2027-01-01")}}})
	e := placed("TR-1", ledger.ModeShip, line("1", "TR", 2))
	body, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := domain.Decode(body, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, root := otel.Tracer("test").Start(context.Background(), "process orders")
	if _, err := h.turns.Submit(ctx, dec.Entity(), body); err != nil {
		t.Fatal(err)
	}
	root.End()
	h.collect(1)
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	traceID := root.SpanContext().TraceID().String()
	if got := h.result(e.EventID).TraceID; got != traceID {
		t.Errorf("result trace_id %q, want the submitter's trace %q", got, traceID)
	}
	byName := map[string]testenv.Span{}
	for _, s := range rcv.Spans() {
		if s.TraceID == traceID {
			byName[s.Name] = s
		}
	}
	step, ok := byName["step"]
	if !ok || step.ParentSpanID != root.SpanContext().SpanID().String() {
		t.Fatalf("spans of the trace %v: want a step span under the submitter's", byName)
	}
	if step.Attrs["junban.event_id"] != e.EventID || step.Attrs["junban.outcome"] != "applied" || step.Attrs["junban.entity"] != e.LCID {
		t.Errorf("step attributes %v", step.Attrs)
	}
	for _, name := range []string{"ledger alloc", "commit", "send " + queue.NameOf(h.queues.Results.URL)} {
		if s, ok := byName[name]; !ok || s.ParentSpanID != step.SpanID {
			t.Errorf("no span %q under the step (spans %v)", name, byName)
		}
	}
}
