package otlpsink_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/junban/junban/tools/otlpsink"
)

// The SDK's own OTLP/HTTP exporter, plain and gzip, sends to the sink; the sink decodes
// each export and counts every span; a body that is not an export is rejected, not counted.
func TestSinkCountsTheSDKsExports(t *testing.T) {
	s, err := otlpsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opt  otlptracehttp.Option
	}{{"plain", otlptracehttp.WithCompression(otlptracehttp.NoCompression)}, {"gzip", otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}} {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.Endpoint()+otlpsink.TracesPath), c.opt)
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		tr := tp.Tracer("otlpsink_test")
		for range 7 {
			pctx, parent := tr.Start(ctx, "parent")
			_, child := tr.Start(pctx, "child")
			child.End()
			parent.End()
		}
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("%s: shutdown (flush) of the exporter: %v", c.name, err)
		}
	}
	if s.Spans() != 28 || s.Requests() < 2 || s.Rejected() != 0 {
		t.Fatalf("spans %d, requests %d, rejected %d; want 28 spans in 2 or more requests, none rejected", s.Spans(), s.Requests(), s.Rejected())
	}
	resp, err := http.Post(s.Endpoint()+otlpsink.TracesPath, "application/x-protobuf", strings.NewReader("\xff\xff not protobuf"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || s.Rejected() != 1 || s.Spans() != 28 {
		t.Fatalf("garbage: status %d, rejected %d, spans %d", resp.StatusCode, s.Rejected(), s.Spans())
	}
}
