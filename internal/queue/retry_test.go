package queue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// TestBatchConsumerRetryBatched: a batch of 25 that its handler hands back as Retry, each
// message with its own delay (1, 2 or 3 s), takes at most 3 visibility calls (ten entries
// each), and every message is received again after its own delay, well before the
// visibility timeout (60 s). Checked against the variant with one ChangeMessageVisibility
// per message under visMu (the code before this test): it failed with 25 visibility calls.
// With a slow SQS (each call 200 ms), the hand-back's calls are in flight together.
func TestBatchConsumerRetryBatched(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 60).Results
	const n = 25
	sendBodies(t, c, q.URL, bodies("rb", n)...)

	var visCalls, visEntries, visInFlight, visMaxInFlight atomic.Int32
	counted := sqs.New(c.Options(), func(o *sqs.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("junbanCountVisibility",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					switch p := in.Parameters.(type) {
					case *sqs.ChangeMessageVisibilityInput:
						visCalls.Add(1)
						visEntries.Add(1)
					case *sqs.ChangeMessageVisibilityBatchInput:
						visCalls.Add(1)
						visEntries.Add(int32(len(p.Entries)))
						// A slow SQS: the calls of one hand-back should overlap.
						cur := visInFlight.Add(1)
						for m := visMaxInFlight.Load(); cur > m && !visMaxInFlight.CompareAndSwap(m, cur); m = visMaxInFlight.Load() {
						}
						time.Sleep(200 * time.Millisecond)
						visInFlight.Add(-1)
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})

	var (
		mu       sync.Mutex
		delay    = map[string]time.Duration{} // by body
		retried  = map[string]time.Time{}     // when the handler answered Retry
		cameBack = map[string]time.Time{}     // when the handler saw it again
		batches  []int                        // sizes of the batches that answered Retry
	)
	cfg := consumerConfig(t, q)
	cfg.BatchMax, cfg.BatchWindow = n, 10*time.Second
	// No heartbeat within the test: every visibility call is the hand-back's.
	cfg.VisibilityTimeout, cfg.HeartbeatInterval = time.Minute, 50*time.Second
	cfg.Client = counted
	cfg.BatchHandler = func(ctx context.Context, ms []queue.Message) []queue.Outcome {
		mu.Lock()
		defer mu.Unlock()
		outs := make([]queue.Outcome, len(ms))
		first := false
		for i, m := range ms {
			b := string(m.Body)
			if _, seen := retried[b]; !seen {
				first = true
				d := time.Duration(len(retried)%3+1) * time.Second
				delay[b], retried[b] = d, time.Now()
				outs[i] = queue.Outcome{Verdict: queue.Retry, Reason: "hold max", After: d}
				continue
			}
			if _, ok := cameBack[b]; !ok {
				cameBack[b] = time.Now()
			}
			outs[i] = queue.Outcome{Verdict: queue.Done}
		}
		if first {
			batches = append(batches, len(ms))
		}
		return outs
	}
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 30*time.Second, "the 25 retried messages to come back, sooner than the 60 s visibility",
		func() bool { mu.Lock(); defer mu.Unlock(); return len(cameBack) == n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 1 || batches[0] != n {
		t.Fatalf("first handled in batches of %v, want one batch of %d", batches, n)
	}
	if calls, entries := visCalls.Load(), visEntries.Load(); calls > 3 || entries != n {
		t.Fatalf("the hand-back of %d messages took %d visibility calls with %d entries, want at most 3 calls with %d", n, calls, entries, n)
	}
	// Checked against calls sent one after another (before the calls went out together):
	// at most one in flight.
	if m := visMaxInFlight.Load(); m < 2 {
		t.Errorf("at most %d visibility call in flight at once; a hand-back of more than ten should overlap its calls", m)
	}
	for b, d := range delay {
		// The emulator keeps whole seconds; a little slack for its clock.
		if took := cameBack[b].Sub(retried[b]); took < d-200*time.Millisecond {
			t.Errorf("%s came back after %v, before its delay %v", b, took, d)
		}
	}
}
