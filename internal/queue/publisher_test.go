package queue_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestPublisherBatches: many concurrent Publish calls share SendMessageBatch requests,
// and every caller learns that its own message was accepted.
func TestPublisherBatches(t *testing.T) {
	t.Parallel()
	c, calls := countingClient(t)
	q := testenv.NewQueues(t, c, 30).Orders
	reg := prometheus.NewRegistry()
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Linger: 20 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ctx := remoteParent(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0"+strconv.Itoa(i%2))
			errs[i] = pub.Publish(ctx, []byte("p"+strconv.Itoa(i)), map[string]string{"i": strconv.Itoa(i)})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pub.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	batches := calls.count("SendMessageBatch")
	if batches >= n || batches < n/10 {
		t.Fatalf("%d Publish calls took %d SendMessageBatch calls", n, batches)
	}
	if calls.count("SendMessage") != 0 {
		t.Fatal("Publish used SendMessage")
	}
	if got := metricValue(t, reg, "junban_queue_published_total"); got != n {
		t.Fatalf("published_total %v, want %d", got, n)
	}

	got := receiveAll(t, c, q.URL, n, 30*time.Second)
	if len(got) != n {
		t.Fatalf("queue holds %d of %d messages", len(got), n)
	}
	for _, m := range got {
		i := aws.ToString(m.MessageAttributes["i"].StringValue)
		if aws.ToString(m.Body) != "p"+i {
			t.Fatalf("body %q with attribute i=%q", aws.ToString(m.Body), i)
		}
		if aws.ToString(m.MessageAttributes[queue.AttrTraceParent].StringValue) == "" {
			t.Fatal("traceparent missing")
		}
		if len(m.MessageAttributes) != 2 {
			t.Fatalf("%d attributes, want i and traceparent", len(m.MessageAttributes))
		}
	}

	if err := pub.Publish(context.Background(), []byte("late"), nil); !errors.Is(err, queue.ErrStopped) {
		t.Fatalf("Publish after Stop: %v, want ErrStopped", err)
	}
}

func TestPublisherSizeLimit(t *testing.T) {
	t.Parallel()
	c, _ := countingClient(t)
	q := testenv.NewQueues(t, c, 30).Orders
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	ctx := context.Background()

	max := bytes.Repeat([]byte("x"), queue.MaxMessageSizeDefault)
	if err := pub.Publish(ctx, max[:len(max)-1], map[string]string{"a": ""}); err != nil {
		t.Fatalf("a body just under the limit: %v", err)
	}
	over := append(max, 'y')
	if err := pub.Publish(ctx, over, nil); !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("oversized body: %v, want ErrTooLarge", err)
	}
	// Attributes count against the limit too.
	if err := pub.Publish(ctx, max, map[string]string{"k": "v"}); !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("body plus attributes over the limit: %v, want ErrTooLarge", err)
	}
	// In a batch, the oversized body fails alone, refused; the other is sent.
	err = pub.PublishBatch(ctx, [][]byte{[]byte("fine"), over})
	if !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("PublishBatch with an oversized body: %v, want ErrTooLarge", err)
	}
	if failed, ok := queue.EntryErrors(err); !ok || len(failed) != 1 || failed[1] == nil || !failed[1].Refused {
		t.Fatalf("PublishBatch with an oversized second body: %v, want message 1 refused and only it", err)
	}
	if err := pub.Publish(ctx, nil, nil); !errors.Is(err, queue.ErrEmptyBody) {
		t.Fatalf("empty body: %v, want ErrEmptyBody", err)
	}

	// receiveAll returns once the message is in: the bound only ends a wait on a machine
	// too loaded to receive a message of the maximum size sooner.
	got := receiveAll(t, c, q.URL, 2, 30*time.Second)
	if len(got) != 2 {
		t.Fatalf("received %d messages, want the accepted large one and the batch's fine one", len(got))
	}
	sizes := []int{len(aws.ToString(got[0].Body)), len(aws.ToString(got[1].Body))}
	slices.Sort(sizes)
	if sizes[0] != len("fine") || sizes[1] != queue.MaxMessageSizeDefault-1 {
		t.Fatalf("the accepted messages arrived with %v bytes, want %d and %d", sizes, len("fine"), queue.MaxMessageSizeDefault-1)
	}

	small, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, MaxMessageSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Stop(context.Background())
	if err := small.Publish(ctx, make([]byte, 1025), nil); !errors.Is(err, queue.ErrTooLarge) {
		t.Fatalf("configured limit: %v, want ErrTooLarge", err)
	}
}

func TestPublisherConfigValidate(t *testing.T) {
	err := queue.PublisherConfig{MaxMessageSize: 10, Linger: -1}.Validate()
	testenv.ErrorNames(t, err, "QueueURL", "MaxMessageSize", "Linger")
}
