package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// remoteParent is a context whose span is the remote one traceparent names.
func remoteParent(t *testing.T, traceparent string) context.Context {
	t.Helper()
	ctx := tracing.Extract(context.Background(), map[string]string{tracing.AttrTraceParent: traceparent}, "")
	if !trace.SpanContextFromContext(ctx).IsValid() {
		t.Fatalf("traceparent %q does not parse", traceparent)
	}
	return ctx
}

// tracingOn points the global tracer provider at a new OTLP receiver for the test, and
// returns the receiver and a flush that exports every span ended so far.
func tracingOn(t *testing.T) (*testenv.OTLPReceiver, func()) {
	t.Helper()
	rcv, _ := testenv.Tracing(t, "queue-test")
	flush := func() {
		if fp, ok := otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
			if err := fp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rcv, flush
}

func spansNamed(spans []testenv.Span, name string) []testenv.Span {
	var out []testenv.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestSendAndProcessSpansJoinOneTrace: a message published inside a span is handled in a
// consumer span whose parent is the send span, in the caller's trace, with the messaging
// attributes; the handler's context carries it.
func TestSendAndProcessSpansJoinOneTrace(t *testing.T) {
	rcv, flush := tracingOn(t)
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	name := queueNameOf(q.URL)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	ctx, root := otel.Tracer("test").Start(context.Background(), "gateway request")
	if err := pub.Publish(ctx, []byte("one"), nil); err != nil {
		t.Fatal(err)
	}
	root.End()

	handled := make(chan trace.SpanContext, 1)
	cfg := consumerConfig(t, q)
	cfg.Client, cfg.Name = c, name
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		handled <- trace.SpanContextFromContext(ctx)
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	var got trace.SpanContext
	select {
	case got = <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not handled")
	}
	stop()
	flush()

	spans := rcv.Spans()
	send, process := spansNamed(spans, "send "+name), spansNamed(spans, "process "+name)
	if len(send) != 1 || len(process) != 1 {
		t.Fatalf("spans %+v: want one send and one process span of %s", spans, name)
	}
	wantTrace := root.SpanContext().TraceID().String()
	if send[0].TraceID != wantTrace || send[0].ParentSpanID != root.SpanContext().SpanID().String() || send[0].Kind != "producer" {
		t.Errorf("send span %+v: want a producer child of the caller's span", send[0])
	}
	if process[0].TraceID != wantTrace || process[0].ParentSpanID != send[0].SpanID || process[0].Kind != "consumer" {
		t.Errorf("process span %+v: want a consumer child of the send span", process[0])
	}
	if got.TraceID().String() != wantTrace || got.SpanID().String() != process[0].SpanID {
		t.Errorf("handler's context %v/%v is not the process span", got.TraceID(), got.SpanID())
	}
	for k, want := range map[string]string{
		"messaging.system": "aws_sqs", "messaging.destination.name": name,
		"messaging.operation.type": "process", "junban.verdict": "done",
	} {
		if process[0].Attrs[k] != want {
			t.Errorf("process span attribute %s = %q, want %q", k, process[0].Attrs[k], want)
		}
	}
	if process[0].Attrs["messaging.message.id"] == "" {
		t.Error("process span without messaging.message.id")
	}
}

// TestAWSTraceHeaderContinuesAnXRayTrace: a message sent with an X-Ray trace header and no
// traceparent is processed in that trace.
func TestAWSTraceHeaderContinuesAnXRayTrace(t *testing.T) {
	if testenv.OnFauxqs(t) {
		t.Skip("fauxqs keeps no AWSTraceHeader system attribute; this test runs on local-aws-sqs (make test-other-sqs)")
	}
	rcv, flush := tracingOn(t)
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	name := queueNameOf(q.URL)
	_, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(q.URL), MessageBody: aws.String("from x-ray"),
		MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan queue.Message, 1)
	cfg := consumerConfig(t, q)
	cfg.Client, cfg.Name = c, name
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		handled <- m
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	var m queue.Message
	select {
	case m = <-handled:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not handled")
	}
	stop()
	flush()
	if m.AWSTraceHeader == "" {
		t.Fatal("the message came without its AWSTraceHeader system attribute")
	}
	process := spansNamed(rcv.Spans(), "process "+name)
	if len(process) != 1 || process[0].TraceID != "5759e988bd862e3fe1be46a994272793" || process[0].ParentSpanID != "53995c3f42cd8ad8" {
		t.Fatalf("process spans %+v: want one in the X-Ray trace, child of its parent", process)
	}
}

// TestBatchSpanLinksEachMessage: a batch handler's span is a root of its own, linked to
// the send span of each message.
func TestBatchSpanLinksEachMessage(t *testing.T) {
	rcv, flush := tracingOn(t)
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	name := queueNameOf(q.URL)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	var sent []string
	for _, b := range []string{"a", "b", "c"} {
		ctx, sp := otel.Tracer("test").Start(context.Background(), "result "+b)
		if err := pub.Publish(ctx, []byte(b), nil); err != nil {
			t.Fatal(err)
		}
		sp.End()
		sent = append(sent, sp.SpanContext().TraceID().String())
	}
	done := make(chan int, 8)
	cfg := consumerConfig(t, q)
	cfg.Client, cfg.Name = c, name
	cfg.BatchMax, cfg.BatchWindow = 10, 500*time.Millisecond
	cfg.BatchHandler = func(ctx context.Context, ms []queue.Message) []queue.Outcome {
		outs := make([]queue.Outcome, len(ms))
		done <- len(ms)
		return outs
	}
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	for n := 0; n < 3; {
		select {
		case k := <-done:
			n += k
		case <-time.After(30 * time.Second):
			t.Fatal("the batch was not handled")
		}
	}
	stop()
	flush()
	linked := map[string]bool{}
	for _, s := range spansNamed(rcv.Spans(), "process "+name) {
		if s.ParentSpanID != "" {
			t.Errorf("batch span %s has a parent", s.SpanID)
		}
		for _, l := range s.Links {
			linked[l[:32]] = true
		}
	}
	for _, tid := range sent {
		if !linked[tid] {
			t.Errorf("no batch span links trace %s", tid)
		}
	}
}
