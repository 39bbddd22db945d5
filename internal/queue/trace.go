package queue

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/platform/tracing"
)

// startSend starts the producer span of a send to queue (n messages, 1 for Publish). The
// messages carry its context (traceparent), so the consumer's span continues the trace.
func startSend(ctx context.Context, queue string, n int) (context.Context, trace.Span) {
	return tracing.StartSend(ctx, tracing.SQS, queue, n)
}

// StartProcess starts the consumer span of handling m from queue, for a handler that
// starts it itself (ConsumerConfig.SpanInHandler) once it has read m's body: the child of
// the span that sent m, named by its traceparent attribute, else its AWSTraceHeader, else
// found, the trace context the handler found in the body (an SNS notification's
// MessageAttributes, say; nil: none). End it with EndProcess.
func StartProcess(ctx context.Context, queue string, m Message, found map[string]string) (context.Context, trace.Span) {
	return startProcess(ctx, queue, m, found)
}

// EndProcess ends a span of StartProcess with the handler's outcome.
func EndProcess(span trace.Span, out Outcome) { endProcess(span, out) }

// startProcess starts the consumer span of handling m from queue, the child of the span
// that sent it: its traceparent attribute, else its AWSTraceHeader, else found (nil:
// none). While the process does not trace, a message's trace context is ignored: the
// sender's would otherwise ride the no-op span into what the handler sends and stores.
func startProcess(ctx context.Context, queue string, m Message, found map[string]string) (context.Context, trace.Span) {
	if tracing.Active() {
		attrs := m.Attributes
		if found != nil && attrs[AttrTraceParent] == "" && m.AWSTraceHeader == "" {
			attrs = found
		}
		ctx = tracing.Extract(ctx, attrs, m.AWSTraceHeader)
	}
	return tracing.Tracer().Start(ctx, "process "+queue,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
			semconv.MessagingSystemAWSSQS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(queue),
			semconv.MessagingMessageID(m.ID),
			attribute.Int("messaging.aws_sqs.receive_count", m.ReceiveCount),
		))
}

// startProcessBatch starts the consumer span of handling a batch from queue: a trace of
// its own, linked to each message's sender (a batch has many parents) whose trace is
// sampled: a sampled-out one records no span to link to.
func startProcessBatch(ctx context.Context, queue string, ms []Message) (context.Context, trace.Span) {
	links := make([]trace.Link, 0, len(ms))
	for _, m := range ms {
		sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), m.Attributes, m.AWSTraceHeader))
		if sc.IsValid() && sc.IsSampled() {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{semconv.MessagingMessageID(m.ID)}})
		}
	}
	return tracing.Tracer().Start(ctx, "process "+queue,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(
			semconv.MessagingSystemAWSSQS,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(queue),
			semconv.MessagingBatchMessageCount(len(ms)),
		))
}

// endProcess ends a process span with the handler's verdict.
func endProcess(span trace.Span, out Outcome) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("junban.verdict", verdictName(out.Verdict)))
		if out.Verdict != Done {
			span.SetStatus(codes.Error, out.Reason)
		}
	}
	span.End()
}

func verdictName(v Verdict) string {
	switch v {
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Poison:
		return "poison"
	}
	return strconv.Itoa(int(v))
}

// endSend ends a send span, with the error of the send if it failed.
func endSend(span trace.Span, err error) { tracing.End(span, err) }
