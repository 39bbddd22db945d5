package order_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestStepIsTracedAndItsResultNamesTheTrace: an event submitted inside a span is stepped
// in a "step" span of that trace, with its ledger script, its commit and the results' send
// as children, and its result carries the trace id (the timeline links it).
func TestStepIsTracedAndItsResultNamesTheTrace(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "order-worker")

	h := newHarness(t, []stock.SKU{{SKU: "TR", Lots: []stock.Lot{onHand("TR1", 1, 10, "2027-01-01")}}})
	e := placed("TR-1", stock.ModeShip, line("1", "TR", 2))
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

// handleMessage hands e to the order-worker's consumer as a message of the orders queue,
// handled in ctx (the message's "process" span).
func (h *harness) handleMessage(ctx context.Context, e event.Order) {
	h.t.Helper()
	body, err := json.Marshal(e)
	if err != nil {
		h.t.Fatal(err)
	}
	w := &intake.Worker{Turns: h.turns, Log: zap.NewNop()}
	if out := w.Handle(ctx, queue.Message{ID: e.EventID, Body: body}); out.Verdict != queue.Done {
		h.t.Fatalf("%s: %+v", e.EventID, out)
	}
}

// spansOf are the received spans of trace id, by name.
func spansOf(rcv *testenv.OTLPReceiver, id string) map[string]testenv.Span {
	byName := map[string]testenv.Span{}
	for _, s := range rcv.Spans() {
		if s.TraceID == id {
			byName[s.Name] = s
		}
	}
	return byName
}

func linkOf(sc trace.SpanContext) string { return sc.TraceID().String() + "/" + sc.SpanID().String() }

// TestQueuedEventIsSteppedInItsOwnTrace: an event queued behind another holder is run
// later by a turn of another message (another replica's, in production). Its step is in
// its own trace, not the holder's: a "wait" span from its queuing to its step and the
// step, both under the span that queued it, each linked to the holder's span; its result
// names its own trace. Seen failing without the stamp (the step lands in the holder's
// trace).
func TestQueuedEventIsSteppedInItsOwnTrace(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "order-worker")
	h := newHarness(t, []stock.SKU{{SKU: "TQ", Lots: []stock.Lot{onHand("TQ1", 1, 10, "2027-01-01")}}})
	e := placed("TQ-1", stock.ModeShip, line("1", "TQ", 2))
	ctx := context.Background()
	lock := lockhandoff.Key(h.prefix, e.LCID, "lock")
	if err := h.rc.Set(ctx, lock, "another-replica", 0).Err(); err != nil {
		t.Fatal(err)
	}
	sctx, submitter := otel.Tracer("test").Start(ctx, "process orders")
	h.handleMessage(sctx, e) // queued: another replica holds the turn
	submitter.End()
	if err := h.rc.Del(ctx, lock).Err(); err != nil {
		t.Fatal(err)
	}
	hctx, holder := otel.Tracer("test").Start(ctx, "process orders (holder)")
	if err := h.turns.Resume(hctx, e.LCID); err != nil {
		t.Fatal(err)
	}
	holder.End()
	h.collect(1)
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	own := submitter.SpanContext().TraceID().String()
	if got := h.result(e.EventID).TraceID; got != own {
		t.Errorf("result trace_id %q, want the submitter's %q (the holder's is %s)", got, own, holder.SpanContext().TraceID())
	}
	spans := spansOf(rcv, own)
	wait, step := spans["wait"], spans["step"]
	parent := submitter.SpanContext().SpanID().String()
	if wait.ParentSpanID != parent || step.ParentSpanID != parent {
		t.Fatalf("want wait and step under the submitter's span %s; spans of its trace: %+v", parent, spans)
	}
	if !slices.Contains(step.Links, linkOf(holder.SpanContext())) || !slices.Contains(wait.Links, linkOf(holder.SpanContext())) {
		t.Errorf("wait links %v, step links %v: want the holder's span %s", wait.Links, step.Links, linkOf(holder.SpanContext()))
	}
	if wait.Start.After(wait.End) || wait.End.After(step.Start.Add(1)) || wait.Attrs["junban.event_id"] != e.EventID {
		t.Errorf("wait %+v, step starts %v: want the wait to end where the step begins", wait, step.Start)
	}
	if s, ok := spans["commit"]; !ok || s.ParentSpanID != step.SpanID {
		t.Errorf("no commit under the step: %+v", spans)
	}
	if held := spansOf(rcv, holder.SpanContext().TraceID().String()); len(held) != 1 {
		t.Errorf("the holder's trace holds %v, want only its own span", held)
	}
}

// TestParkedEventShowsItsWait: a payment parked before its order is applied in the step
// of the order's placement; its result names the payment's own trace, where a "parked"
// span covers its wait, linked to the step that applied it.
func TestParkedEventShowsItsWait(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "order-worker")
	h := newHarness(t, []stock.SKU{{SKU: "TP", Lots: []stock.Lot{onHand("TP1", 1, 10, "2027-01-01")}}})
	pay := ev("TP-1", event.PaymentConfirmed, nil)
	place := placed("TP-1", stock.ModeShip, line("1", "TP", 1))
	ctx := context.Background()
	pctx, paySpan := otel.Tracer("test").Start(ctx, "process orders (payment)")
	h.handleMessage(pctx, pay) // parked: no order yet
	paySpan.End()
	qctx, placeSpan := otel.Tracer("test").Start(ctx, "process orders (placed)")
	h.handleMessage(qctx, place)
	placeSpan.End()
	h.collect(2)
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	payTrace, placeTrace := paySpan.SpanContext().TraceID().String(), placeSpan.SpanContext().TraceID().String()
	if got := h.result(pay.EventID).TraceID; got != payTrace {
		t.Errorf("payment's result trace_id %q, want its own %q (the placement's is %s)", got, payTrace, placeTrace)
	}
	if got := h.result(place.EventID).TraceID; got != placeTrace {
		t.Errorf("placement's result trace_id %q, want %q", got, placeTrace)
	}
	step := spansOf(rcv, placeTrace)["step"]
	parked, ok := spansOf(rcv, payTrace)["parked"]
	if !ok || parked.ParentSpanID != paySpan.SpanContext().SpanID().String() {
		t.Fatalf("want a parked span under the payment's span; its trace: %+v", spansOf(rcv, payTrace))
	}
	if !slices.Contains(parked.Links, placeTrace+"/"+step.SpanID) || parked.Attrs["junban.outcome"] != "applied" {
		t.Errorf("parked span %+v: want it linked to the step %s that applied it", parked, step.SpanID)
	}
}

// TestSampledOutQueuedEventCostsNoSpans: an event whose message's trace is sampled out
// records no span, though another message's (sampled) turn runs it, and its result names
// no trace.
func TestSampledOutQueuedEventCostsNoSpans(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "order-worker")
	h := newHarness(t, []stock.SKU{{SKU: "TS", Lots: []stock.Lot{onHand("TS1", 1, 10, "2027-01-01")}}})
	e := placed("TS-1", stock.ModeShip, line("1", "TS", 2))
	ctx := context.Background()
	lock := lockhandoff.Key(h.prefix, e.LCID, "lock")
	if err := h.rc.Set(ctx, lock, "another-replica", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, Remote: true})
	h.handleMessage(trace.ContextWithRemoteSpanContext(ctx, out), e)
	if err := h.rc.Del(ctx, lock).Err(); err != nil {
		t.Fatal(err)
	}
	hctx, holder := otel.Tracer("test").Start(ctx, "process orders (holder)")
	if err := h.turns.Resume(hctx, e.LCID); err != nil {
		t.Fatal(err)
	}
	holder.End()
	h.collect(1)
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.result(e.EventID).TraceID; got != "" {
		t.Errorf("result trace_id %q, want none", got)
	}
	for _, s := range rcv.Spans() {
		if s.TraceID == out.TraceID().String() || s.Name == "step" {
			t.Errorf("span %s (%s) recorded for a sampled-out event", s.Name, s.TraceID)
		}
	}
}
