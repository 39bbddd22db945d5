package queue_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// forever is a batch window no test waits out: a message that waits for it fails its
// test's generous deadline instead.
const forever = 10 * time.Minute

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
