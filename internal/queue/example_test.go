package queue_test

import (
	"context"
	"encoding/json"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/queue"
)

// A worker consumes a queue until SIGTERM, then shuts down within the budget.
func ExampleConsumer() {
	var c *sqs.Client // queue.NewClient(ctx, cfg.SQS)
	cons, err := queue.NewConsumer(queue.ConsumerConfig{
		Client:      c,
		QueueURL:    "http://127.0.0.1:4566/000000000000/orders",
		DLQURL:      "http://127.0.0.1:4566/000000000000/orders-dlq",
		Concurrency: 16,
		Registerer:  prometheus.DefaultRegisterer,
		Logger:      zap.NewExample(),
		Handler: func(ctx context.Context, m queue.Message) queue.Outcome {
			var ev struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(m.Body, &ev); err != nil || ev.EventID == "" {
				return queue.Outcome{Verdict: queue.Poison, Reason: "malformed event"}
			}
			// ... move the event's custody on (idempotently), then:
			return queue.Outcome{Verdict: queue.Done}
		},
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	_ = cons.Run(ctx)
}

// A persist-worker writes many results in one transaction.
func ExampleNewBatchConsumer() {
	var c *sqs.Client
	cons, err := queue.NewBatchConsumer(queue.ConsumerConfig{
		Client:   c,
		QueueURL: "http://127.0.0.1:4566/000000000000/results",
		DLQURL:   "http://127.0.0.1:4566/000000000000/results-dlq",
		BatchMax: 100,
		BatchHandler: func(ctx context.Context, ms []queue.Message) []queue.Outcome {
			outs := make([]queue.Outcome, len(ms))
			// ... one transaction for all of ms; on failure every outcome is Retry.
			for i := range outs {
				outs[i] = queue.Outcome{Verdict: queue.Done}
			}
			return outs
		},
	})
	if err != nil {
		panic(err)
	}
	_ = cons.Run(context.Background())
}

// Publish returns once SQS accepted the message; concurrent calls share batches. The
// message carries the trace context of ctx's span (traceparent), and the consumer's span
// continues that trace.
func ExamplePublisher() {
	var c *sqs.Client
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: "http://127.0.0.1:4566/000000000000/results"})
	if err != nil {
		panic(err)
	}
	defer pub.Stop(context.Background())
	ctx, span := otel.Tracer("checkout").Start(context.Background(), "place order")
	defer span.End()
	if err := pub.Publish(ctx, []byte(`{"event_id":"evt_1"}`), map[string]string{"type": "order.placed"}); err != nil {
		// errors.Is(err, queue.ErrTooLarge): refused before sending, never truncated.
		panic(err)
	}
}
