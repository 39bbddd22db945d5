package queue_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestConsumerLinesCarryTheMessagesTrace: the consumer's lines about one message carry
// its message_id and the trace_id and span_id of the span that sent it (its traceparent),
// here a Poison message's "message dead-lettered" and a Retry's "retry later".
func TestConsumerLinesCarryTheMessagesTrace(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := remoteParent(t, "00-"+traceID+"-"+spanID+"-01")
	for _, body := range []string{"poison", "retry"} {
		if err := pub.Publish(ctx, []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}

	core, logs := observer.New(zapcore.DebugLevel)
	cfg := consumerConfig(t, q)
	cfg.Client = c
	cfg.Logger = zap.New(core)
	cfg.RetryDelay = func(int) time.Duration { return time.Hour }
	cfg.Handler = func(_ context.Context, m queue.Message) queue.Outcome {
		if string(m.Body) == "poison" {
			return queue.Outcome{Verdict: queue.Poison, Reason: "never valid"}
		}
		return queue.Outcome{Verdict: queue.Retry, Reason: "not now"}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	msgs := []string{"message dead-lettered", "retry later"}
	testenv.WaitFor(t, 30*time.Second, "a dead-letter and a retry logged", func() bool {
		return logs.FilterMessage(msgs[0]).Len() > 0 && logs.FilterMessage(msgs[1]).Len() > 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, msg := range msgs {
		f := logs.FilterMessage(msg).All()[0].ContextMap()
		if f["message_id"] == nil || f["message_id"] == "" || f["trace_id"] != traceID || f["span_id"] == nil {
			t.Errorf("line %q: fields %v, want message_id, trace_id %s and span_id", msg, f, traceID)
		}
	}
}
