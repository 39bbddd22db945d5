package tracing_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/platform/tracing"
)

// FuzzExtract: a message's attributes are the sender's; any value gives a valid remote
// span context or none, never a panic.
func FuzzExtract(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE", "")
	f.Add("", "", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Add("00-00000000000000000000000000000000-0000000000000000-01", "", "Root=1-;Parent=;Sampled=9")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b,c", "Root=1-5759e988-bd862e3fe1be46a994272793")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"+strings.Repeat("x", 600), strings.Repeat("k=v,", 32)+"k32="+strings.Repeat("v", 255), "")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a="+strings.Repeat("v", 255)+",b="+strings.Repeat("v", 255), "")
	f.Fuzz(func(t *testing.T, tp, ts, xray string) {
		ctx := tracing.Extract(context.Background(), map[string]string{tracing.AttrTraceParent: tp, tracing.AttrTraceState: ts}, xray)
		sc := trace.SpanContextFromContext(ctx)
		if sc.IsValid() && !sc.IsRemote() {
			t.Fatalf("extracted a local span context %+v", sc)
		}
		// What junban writes back of a sender's context is bounded: a 55-character
		// traceparent and a tracestate of at most MaxTraceStateBytes.
		out := map[string]string{}
		tracing.Inject(ctx, out)
		if p := out[tracing.AttrTraceParent]; p != "" && len(p) != 55 {
			t.Fatalf("injected traceparent %q", p)
		}
		if len(out[tracing.AttrTraceState]) > tracing.MaxTraceStateBytes {
			t.Fatalf("injected a %d-byte tracestate", len(out[tracing.AttrTraceState]))
		}
	})
}
