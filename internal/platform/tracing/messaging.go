package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName names junban's instrumentation scope.
const TracerName = "github.com/junban/junban"

// Tracer is junban's tracer, from the global provider (Setup's, or the no-op one).
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// The messaging systems junban sends to.
var (
	SQS = semconv.MessagingSystemAWSSQS
	SNS = semconv.MessagingSystemKey.String("aws_sns")
)

// StartSend starts the producer span of a send of n messages (1 for one) to destination
// (a queue's or a topic's name) of system (SQS, SNS), named as the messaging conventions
// name it: "send <destination>". Inject its context into each message. With tracing off
// it is OpenTelemetry's no-op span, which still carries a caller's remote context on (a
// traceparent received upstream), at the cost of a context value.
func StartSend(ctx context.Context, system attribute.KeyValue, destination string, n int, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	attrs = append(attrs,
		system,
		semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"),
		semconv.MessagingDestinationName(destination),
	)
	if n > 1 {
		attrs = append(attrs, semconv.MessagingBatchMessageCount(n))
	}
	return Tracer().Start(ctx, "send "+destination, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

// End ends span, with err (if any) as its error status.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
