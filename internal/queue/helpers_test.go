package queue_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// opCounter counts SQS calls by operation name.
type opCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *opCounter) count(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[op]
}

// countingClient returns an SQS client for the emulator whose calls are counted.
func countingClient(t *testing.T) (*sqs.Client, *opCounter) {
	t.Helper()
	base := testenv.SQS(t)
	oc := &opCounter{n: map[string]int{}}
	c := sqs.New(base.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("junbanCountOps",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					oc.mu.Lock()
					oc.n[awsmiddleware.GetOperationName(ctx)]++
					oc.mu.Unlock()
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
	return c, oc
}

// recordDone is a batch handler that records every message in rec and answers Done,
// after calling first (when not nil) with the batch.
func recordDone(rec *recorder, first func(ms []queue.Message)) queue.BatchHandler {
	return func(ctx context.Context, ms []queue.Message) []queue.Outcome {
		if first != nil {
			first(ms)
		}
		outs := make([]queue.Outcome, len(ms))
		for i, m := range ms {
			rec.add(m)
			outs[i] = queue.Outcome{Verdict: queue.Done}
		}
		return outs
	}
}

// runUntilHandled runs cons until rec holds want distinct messages, then stops it.
func runUntilHandled(t *testing.T, cons *queue.Consumer, rec *recorder, want int, timeout time.Duration) {
	t.Helper()
	stop := start(t, cons)
	testenv.WaitFor(t, timeout, fmt.Sprintf("%d messages handled", want), func() bool { return rec.distinct() == want })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// onReceive returns a client for c's endpoint that calls before with each ReceiveMessage
// input as it goes out, and the function before returns once the call is answered.
func onReceive(c *sqs.Client, before func(*sqs.ReceiveMessageInput) (after func())) *sqs.Client {
	return sqs.New(c.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("junbanOnReceive",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if r, ok := in.Parameters.(*sqs.ReceiveMessageInput); ok {
						defer before(r)()
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
}

// sendBodies puts bodies on the queue with plain SendMessageBatch calls.
func sendBodies(t *testing.T, c *sqs.Client, url string, bodies ...string) {
	t.Helper()
	for lo := 0; lo < len(bodies); lo += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i := lo; i < min(lo+10, len(bodies)); i++ {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(bodies[i])})
		}
		out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("send: %s", aws.ToString(out.Failed[0].Message))
		}
	}
}

// receiveAll long-polls url until it holds want distinct messages (by ID) or the timeout
// passes; it leaves them invisible for the queue's visibility timeout.
func receiveAll(t *testing.T, c *sqs.Client, url string, want int, timeout time.Duration) []types.Message {
	t.Helper()
	seen := map[string]bool{}
	var out []types.Message
	deadline := time.Now().Add(timeout)
	for len(out) < want && time.Now().Before(deadline) {
		res, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			AttributeNames:        []types.QueueAttributeName{types.QueueAttributeNameAll},
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range res.Messages {
			if !seen[aws.ToString(m.MessageId)] {
				seen[aws.ToString(m.MessageId)] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// queueDepth is the number of messages in the queue, visible or in flight (0 means
// empty on real SQS and on the emulator, whose ApproximateNumberOfMessages also counts
// messages in flight).
func queueDepth(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	a := queueAttributes(t, c, url)
	return a[types.QueueAttributeNameApproximateNumberOfMessages] +
		a[types.QueueAttributeNameApproximateNumberOfMessagesNotVisible] +
		a[types.QueueAttributeNameApproximateNumberOfMessagesDelayed]
}

// inFlight is the number of messages received and not yet deleted or visible again.
func inFlight(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	return queueAttributes(t, c, url)[types.QueueAttributeNameApproximateNumberOfMessagesNotVisible]
}

func queueAttributes(t *testing.T, c *sqs.Client, url string) map[types.QueueAttributeName]int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := map[types.QueueAttributeName]int{}
	for k, v := range out.Attributes {
		n[types.QueueAttributeName(k)], _ = strconv.Atoi(v)
	}
	return n
}

// start runs c until the returned stop is called; stop returns Run's error.
func start(t *testing.T, c *queue.Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Error("consumer did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// recorder remembers what handlers saw, safely across goroutines.
type recorder struct {
	mu    sync.Mutex
	calls map[string][]queue.Message // by body
}

func newRecorder() *recorder { return &recorder{calls: map[string][]queue.Message{}} }

func (r *recorder) add(m queue.Message) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[string(m.Body)] = append(r.calls[string(m.Body)], m)
	return len(r.calls[string(m.Body)])
}

func (r *recorder) get(body string) []queue.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]queue.Message(nil), r.calls[body]...)
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}
