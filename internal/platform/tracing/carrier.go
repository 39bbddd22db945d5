package tracing

import (
	"context"

	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// The message attributes that carry a trace context.
const (
	// AttrTraceParent and AttrTraceState are W3C trace context's, as message attributes.
	AttrTraceParent = "traceparent"
	AttrTraceState  = "tracestate"
	// AWSTraceHeader is SQS's system attribute with an X-Ray trace header
	// ("Root=1-...;Parent=...;Sampled=1"), set by AWS services and X-Ray SDKs.
	AWSTraceHeader = "AWSTraceHeader"
)

// MaxTraceStateBytes bounds a tracestate junban takes from a message: W3C trace context
// lets a vendor drop a tracestate longer than 512 characters, and otel's parser
// (trace.ParseTraceState) already refuses one of more than 32 members or a malformed one.
const MaxTraceStateBytes = 512

// xrayHeader is the header name the X-Ray propagator reads.
const xrayHeader = "X-Amzn-Trace-Id"

// Inject writes ctx's trace context into attrs (traceparent, and tracestate when it has
// one); a context without a valid span writes nothing.
func Inject(ctx context.Context, attrs map[string]string) {
	Propagator.Inject(ctx, propagation.MapCarrier(attrs))
}

// Extract returns ctx with the remote trace context a message carries: its traceparent
// (and tracestate) attributes, or, without a valid one, its AWSTraceHeader system
// attribute (awsTraceHeader, "" when absent). A malformed value is ignored: the message
// then starts a trace of its own.
func Extract(ctx context.Context, attrs map[string]string, awsTraceHeader string) context.Context {
	if attrs[AttrTraceParent] != "" {
		out := Propagator.Extract(ctx, propagation.MapCarrier(attrs))
		if trace.SpanContextFromContext(out).IsValid() {
			return out
		}
	}
	if awsTraceHeader != "" {
		return xray.Propagator{}.Extract(ctx, propagation.MapCarrier{xrayHeader: awsTraceHeader})
	}
	return ctx
}

// LogFields are the trace_id and span_id of ctx's span, for a log line about the work it
// traces; none when ctx has no valid span.
func LogFields(ctx context.Context) []zap.Field {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []zap.Field{zap.Stringer("trace_id", sc.TraceID()), zap.Stringer("span_id", sc.SpanID())}
}
