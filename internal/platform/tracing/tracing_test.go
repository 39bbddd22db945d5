package tracing_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/testenv"
)

// setup runs tracing.Setup and restores the global provider after the test.
func setup(t *testing.T, service string) func(context.Context) error {
	t.Helper()
	prev := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	shutdown, err := tracing.Setup(context.Background(), service, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return shutdown
}

func TestSetupExportsToTheOTLPEndpoint(t *testing.T) {
	rcv := testenv.StartOTLPReceiver(t)
	rcv.Setenv(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	shutdown := setup(t, "order-worker")
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != "order-worker" {
		t.Fatalf("received %+v, want one span work of order-worker", spans)
	}
}

func TestServiceNameFromTheEnvironment(t *testing.T) {
	rcv := testenv.StartOTLPReceiver(t)
	rcv.Setenv(t)
	t.Setenv("OTEL_SERVICE_NAME", "orders-eu")
	shutdown := setup(t, "order-worker")
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	span.End()
	_ = shutdown(context.Background())
	if spans := rcv.Spans(); len(spans) != 1 || spans[0].Service != "orders-eu" {
		t.Fatalf("received %+v, want service orders-eu", spans)
	}
}

// TestSampledOutCostsNoSpans: with the sampler off, spans are not recorded and nothing
// is exported.
func TestSampledOutCostsNoSpans(t *testing.T) {
	rcv := testenv.StartOTLPReceiver(t)
	rcv.Setenv(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	shutdown := setup(t, "order-worker")
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	if span.IsRecording() {
		t.Error("a sampled-out span records")
	}
	span.End()
	_ = shutdown(context.Background())
	if n := len(rcv.Spans()); n != 0 {
		t.Fatalf("%d spans exported with the sampler off", n)
	}
}

// TestOffWithoutAnEndpoint: no endpoint, no provider: spans are the no-op's.
func TestOffWithoutAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if tracing.Enabled() {
		t.Fatal("enabled without an endpoint")
	}
	setup(t, "order-worker")
	_, span := otel.Tracer("test").Start(context.Background(), "work")
	defer span.End()
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("a span records without an endpoint")
	}
}

// TestOffIgnoresARequestsTraceContext: without an endpoint, Setup installs no
// propagator, so a request's traceparent (read by otelhttp through the global one) does
// not reach what the process sends.
func TestOffIgnoresARequestsTraceContext(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	setup(t, "webhook-gateway")
	h := propagation.HeaderCarrier{}
	h.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if sc := trace.SpanContextFromContext(otel.GetTextMapPropagator().Extract(context.Background(), h)); sc.IsValid() {
		t.Fatalf("a request's trace context %v read while tracing is off", sc.TraceID())
	}
}

// TestExtractBoundsTheTraceState: a tracestate over MaxTraceStateBytes is dropped and
// the traceparent kept; a shorter one is kept; one otel's parser refuses (more than 32
// members) is dropped too. What Inject writes back is bounded the same.
func TestExtractBoundsTheTraceState(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	members := func(n, size int) string {
		m := make([]string, n)
		for i := range m {
			m[i] = fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", size))
		}
		return strings.Join(m, ",")
	}
	for _, c := range []struct {
		name, state, want string
	}{
		{"short", "shop=1,vendor=abc", "shop=1,vendor=abc"},
		{"at the bound", members(8, 60)[:tracing.MaxTraceStateBytes-4] + "vvvv", members(8, 60)[:tracing.MaxTraceStateBytes-4] + "vvvv"},
		{"16 KB of 32 members", members(32, 500), ""},
		{"33 members", members(33, 1), ""},
	} {
		ctx := tracing.Extract(context.Background(), map[string]string{tracing.AttrTraceParent: tp, tracing.AttrTraceState: c.state}, "")
		sc := trace.SpanContextFromContext(ctx)
		if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: traceparent lost: %v", c.name, sc.TraceID())
		}
		if got := sc.TraceState().String(); got != c.want {
			t.Errorf("%s: tracestate of %d bytes kept, want %d (%.60q)", c.name, len(got), len(c.want), got)
		}
		out := map[string]string{}
		tracing.Inject(ctx, out)
		if len(out[tracing.AttrTraceState]) > tracing.MaxTraceStateBytes || out[tracing.AttrTraceParent] != tp {
			t.Errorf("%s: injected %d-byte tracestate, traceparent %q", c.name, len(out[tracing.AttrTraceState]), out[tracing.AttrTraceParent])
		}
	}
}

func TestProtocolOtherThanHTTPProtobufIsRefused(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := tracing.Setup(context.Background(), "x", zap.NewNop()); err == nil {
		t.Fatal("grpc accepted")
	}
}

func TestInjectExtractRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	attrs := map[string]string{}
	tracing.Inject(ctx, attrs)
	if attrs[tracing.AttrTraceParent] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q", attrs[tracing.AttrTraceParent])
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), attrs, ""))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() || !got.IsSampled() {
		t.Fatalf("extracted %+v", got)
	}
}

func TestExtractAWSTraceHeader(t *testing.T) {
	h := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), map[string]string{}, h))
	if got.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || got.SpanID().String() != "53995c3f42cd8ad8" || !got.IsSampled() {
		t.Fatalf("extracted %v/%v sampled %v", got.TraceID(), got.SpanID(), got.IsSampled())
	}
	// A valid traceparent wins over the X-Ray header; a malformed one does not.
	tp := map[string]string{tracing.AttrTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	if got := trace.SpanContextFromContext(tracing.Extract(context.Background(), tp, h)); got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("traceparent lost to AWSTraceHeader: %v", got.TraceID())
	}
	bad := map[string]string{tracing.AttrTraceParent: "00-zz"}
	if got := trace.SpanContextFromContext(tracing.Extract(context.Background(), bad, h)); got.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
		t.Fatalf("a malformed traceparent hid AWSTraceHeader: %v", got.TraceID())
	}
}

func TestLogFields(t *testing.T) {
	if f := tracing.LogFields(context.Background()); f != nil {
		t.Fatalf("fields without a span: %v", f)
	}
	rcv := testenv.StartOTLPReceiver(t)
	rcv.Setenv(t)
	shutdown := setup(t, "x")
	defer shutdown(context.Background())
	ctx, span := otel.Tracer("test").Start(context.Background(), "work")
	defer span.End()
	f := tracing.LogFields(ctx)
	if len(f) != 2 || f[0].Key != "trace_id" || f[1].Key != "span_id" {
		t.Fatalf("fields %v", f)
	}
	_ = time.Second
}
