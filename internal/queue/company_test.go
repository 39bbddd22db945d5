package queue_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// forever is a linger or batch window no test waits out: a message that waits for it
// fails its test's generous deadline instead.
const forever = 10 * time.Minute

// TestPublisherSendsALoneMessageAtOnce: with nothing in flight, a message goes without
// waiting for its Linger. Seen failing (the Publish's deadline passed) with the batch
// sent only when full or at Linger, the rule before.
func TestPublisherSendsALoneMessageAtOnce(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Orders
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Linger: forever})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, []byte("lone"), nil); err != nil {
		t.Fatalf("a lone Publish with a Linger of %v: %v", forever, err)
	}
}

// TestPublisherFillsBatchesWhileOneIsInFlight: while a SendMessageBatch is in flight
// (held at the client), the messages published meanwhile gather into full batches, and
// the rest go as soon as the calls in flight answered, without waiting for the Linger.
// Counted in calls, not time. Seen failing with every message sent at once whatever was
// in flight (100 calls for 100 messages), and (the deadline passed) without the wake-up
// when the calls in flight answered.
func TestPublisherFillsBatchesWhileOneIsInFlight(t *testing.T) {
	t.Parallel()
	base := testenv.SQS(t)
	q := testenv.NewQueues(t, base, 30).Orders
	var calls, messages atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	var sent atomic.Bool
	c := sqs.New(base.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("junbanHoldFirstSend",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if b, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok {
						calls.Add(1)
						messages.Add(int32(len(b.Entries)))
						if !sent.Swap(true) {
							close(held)
							<-release
						}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL, Linger: forever})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const n = 100
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = pub.Publish(ctx, []byte("m0"), nil) })
	<-held
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = pub.Publish(ctx, []byte("m"+strconv.Itoa(i)), nil) })
	}
	// The full batches of the 99 go while the first call is held.
	testenv.WaitFor(t, 30*time.Second, "nine full batches behind the held call", func() bool { return calls.Load() >= 10 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if messages.Load() != n {
		t.Fatalf("%d messages sent, want %d", messages.Load(), n)
	}
	if per := float64(n) / float64(calls.Load()); per < 5 {
		t.Fatalf("%d SendMessageBatch calls for %d messages (%.1f a call), want 5 or more a call", calls.Load(), n, per)
	}
}

// TestBatchConsumerCutsALoneReceiveAtOnce: a batch consumer hands a part-full receive to
// its BatchHandler at once when no call is in flight, without waiting for its
// BatchWindow; while a call is in flight the receives gather into one batch, which goes
// when the call returned. Counted in batch sizes, not time. Seen failing (the deadline
// passed) with a batch cut only at BatchMax or BatchWindow, the rule before; and with
// every part-full receive cut at once whatever was in flight: batches
// [1 1 1 1 1 1 1 1 1 7 10], not [1 25].
func TestBatchConsumerCutsALoneReceiveAtOnce(t *testing.T) {
	t.Parallel()
	base := testenv.SQS(t)
	q := testenv.NewQueues(t, base, 30).Results
	var (
		mu    sync.Mutex
		sizes []int
	)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.Client = base
	cfg.BatchMax, cfg.BatchWindow, cfg.Receivers, cfg.Concurrency = 50, forever, 2, 4
	cfg.BatchHandler = recordDone(rec, func(ms []queue.Message) {
		mu.Lock()
		sizes = append(sizes, len(ms))
		firstCall := len(sizes) == 1
		mu.Unlock()
		if firstCall {
			started <- struct{}{}
			<-release
		}
	})
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	sendBodies(t, base, q.URL, "lone")
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatalf("a lone message not handed over with a BatchWindow of %v", forever)
	}
	// One at a time, so that the receives come back part-full, as a flow's do.
	for _, b := range bodies("company", 25) {
		sendBodies(t, base, q.URL, b)
	}
	reg := cfg.Registerer.(*prometheus.Registry)
	testenv.WaitFor(t, 30*time.Second, "26 messages received", func() bool {
		return metricValue(t, reg, "junban_queue_received_total") >= 26
	})
	close(release)
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d messages handled", 26), func() bool { return rec.distinct() == 26 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{1, 25}) {
		t.Fatalf("batches %v, want [1 25]: the lone message at once, the rest together while it was handled", sizes)
	}
}
