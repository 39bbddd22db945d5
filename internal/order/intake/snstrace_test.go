package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestSNSNotificationContinuesItsPublishersTrace: an event published to a real SNS topic
// with a traceparent message attribute reaches a queue subscribed without raw delivery,
// where the attribute is in the notification's body, not the SQS message's. With the
// order-worker's setting (the Worker, with its Queue, starts the process span from what it
// unwrapped; the consumer's SpanInHandler) the process span continues the publisher's
// trace, under the publisher's span; without it (the control: the consumer starts the
// span from the message's attributes) the message starts a trace of its own.
//
// Broken variant tried: Worker.Handle passing nil for the context it found to
// queue.StartProcess: the process span started a trace of its own.
func TestSNSNotificationContinuesItsPublishersTrace(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "order-worker")
	sn, c := testenv.SNS(t), testenv.SQS(t)
	// Two queues take the same notification: one consumer reads each.
	withQ, withoutQ := testenv.NewQueues(t, c, 20).Orders, testenv.NewQueues(t, c, 20).Orders
	topic := testenv.Topic(t, sn)
	ctx := context.Background()
	for _, q := range []queue.Pair{withQ, withoutQ} {
		if _, err := topics.Subscribe(ctx, sn, c, topics.Spec{TopicARN: topic, QueueURL: q.URL}); err != nil {
			t.Fatal(err)
		}
	}

	const (
		publisherTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		publisherSpan  = "00f067aa0ba902b7"
	)
	if _, err := sn.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(topic),
		Message:  aws.String(`{"event_id":"SNS-T-` + testenv.ID() + `","type":"order.cancelled","lcid":"SNS-T","occurred_at":"2026-12-03T00:00:00Z"}`),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			tracing.AttrTraceParent: {DataType: aws.String("String"), StringValue: aws.String("00-" + publisherTrace + "-" + publisherSpan + "-01")},
			tracing.AttrTraceState:  {DataType: aws.String("String"), StringValue: aws.String("shop=1")},
		},
	}); err != nil {
		t.Fatal(err)
	}
	seen := func(q queue.Pair, inWorker bool) trace.SpanContext {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		turns := &spanTurns{got: make(chan trace.SpanContext, 1), done: cancel}
		got := turns.got
		w := &intake.Worker{Turns: turns, Log: zap.NewNop()}
		if inWorker {
			w.Queue = queue.NameOf(q.URL)
		}
		cons, err := queue.NewConsumer(queue.ConsumerConfig{
			Client: c, QueueURL: q.URL, DLQURL: q.DLQURL, WaitTimeSeconds: 1,
			SpanInHandler: inWorker,
			Handler:       w.Handle,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := cons.Run(rctx); err != nil {
			t.Fatal(err)
		}
		select {
		case sc := <-got:
			return sc
		default:
			t.Fatal("no notification reached the consumer")
			return trace.SpanContext{}
		}
	}

	with := seen(withQ, true)
	without := seen(withoutQ, false)
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if with.TraceID().String() != publisherTrace {
		t.Errorf("with the carrier: trace %s, want the publisher's %s", with.TraceID(), publisherTrace)
	}
	if without.TraceID().String() == publisherTrace {
		t.Errorf("without the carrier the body's traceparent was followed: the control cannot fail")
	}
	process, ok := spansOf(rcv, publisherTrace)["process "+queue.NameOf(withQ.URL)]
	if !ok || process.ParentSpanID != publisherSpan {
		t.Errorf("spans of the publisher's trace %v: want the process span under the publisher's span %s", spansOf(rcv, publisherTrace), publisherSpan)
	}
}

// spanTurns is the Turns of a Worker that takes every submission: it hands on the span
// context of the first, then calls done.
type spanTurns struct {
	got  chan trace.SpanContext
	done func()
}

func (s *spanTurns) Submit(ctx context.Context, _ string, _ []byte) (lockhandoff.Outcome, error) {
	select {
	case s.got <- trace.SpanContextFromContext(ctx):
	default:
	}
	s.done()
	return lockhandoff.OutcomeQueued, nil
}

func (s *spanTurns) Resume(context.Context, string) error { return nil }

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
