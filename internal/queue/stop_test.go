package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// Stop waits for the batches in flight, and no longer than its context: with a
// SendMessageBatch held, Stop under an ended context returns the context's error; once
// the send is let go, Stop returns nil and the message is on the queue.
// Broken variant tried: a Stop that waits for the batcher without watching ctx (the old
// Close) blocks until the send is let go, and the test times out.
func TestPublisherStopBoundedByContext(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Orders
	sending, release := make(chan struct{}, 1), make(chan struct{})
	held := sqs.New(c.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("junbanHoldSend",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if _, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
						select {
						case sending <- struct{}{}:
						default:
						}
						<-release
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: held, QueueURL: q.URL})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan error, 1)
	go func() { published <- pub.Publish(context.Background(), []byte("held"), nil) }()
	<-sending

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pub.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with a send held and its context ended: %v, want context.Canceled", err)
	}
	close(release)
	if err := pub.Stop(context.Background()); err != nil {
		t.Fatalf("Stop once the send was let go: %v", err)
	}
	if err := <-published; err != nil {
		t.Fatalf("the held message: %v", err)
	}
	if got := receiveAll(t, c, q.URL, 1, 30*time.Second); len(got) != 1 {
		t.Fatalf("queue holds %d messages, want the held one", len(got))
	}
}
