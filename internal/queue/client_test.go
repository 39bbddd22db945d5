package queue_test

import (
	"context"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestClientKeepsConnections: after a burst of more calls at once than the SDK's
// transport keeps idle per host (10), the next burst of the same size reuses every
// connection instead of dialling again. With the SDK's default transport (tried: no
// WithHTTPClient in NewClient) the second burst dialled 22 of its 32 connections.
func TestClientKeepsConnections(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	const calls = 32
	if calls > queue.IdleConns {
		t.Fatalf("the test needs fewer calls (%d) than queue.IdleConns (%d)", calls, queue.IdleConns)
	}

	// burst makes calls long polls of an empty queue at once (each holds its connection
	// for the poll's second) and counts the connections they dialled.
	burst := func() int {
		var dialled atomic.Int64
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) {
				if !info.Reused {
					dialled.Add(1)
				}
			},
		})
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL), WaitTimeSeconds: 1})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		return int(dialled.Load())
	}

	if first := burst(); first < calls/2 {
		t.Fatalf("the first burst dialled %d connections: the calls did not overlap", first)
	}
	if again := burst(); again != 0 {
		t.Fatalf("the second burst of %d calls dialled %d connections; want every one reused", calls, again)
	}
}

// TestMaxMessageSize reads the limit a queue has, and the one it is given later. A server
// that does not report it gets SQS's classic default.
func TestMaxMessageSize(t *testing.T) {
	c := testenv.SQS(t)
	ctx := context.Background()
	qs := testenv.NewQueues(t, c, 10)
	size, reported, err := queue.MaxMessageSize(ctx, c, qs.Orders.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !reported {
		if size != queue.MaxMessageSizeDefault {
			t.Fatalf("unreported size %d, want the default %d", size, queue.MaxMessageSizeDefault)
		}
		t.Skip("the server does not report MaximumMessageSize")
	}
	if size < 1024 || size > 1024*1024 {
		t.Fatalf("size %d outside SQS's range", size)
	}
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl: aws.String(qs.Orders.URL), Attributes: map[string]string{"MaximumMessageSize": "65536"},
	}); err != nil {
		t.Fatal(err)
	}
	if size, _, err = queue.MaxMessageSize(ctx, c, qs.Orders.URL); err != nil || size != 65536 {
		t.Fatalf("after setting 65536: size %d, err %v", size, err)
	}
	if _, _, err := queue.MaxMessageSize(ctx, c, qs.Orders.URL+"-missing"); err == nil {
		t.Fatal("no error for a queue that does not exist")
	}
}
