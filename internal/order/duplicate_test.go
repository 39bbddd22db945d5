package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// recorder counts, per event id, the results that reached the results queue, and can
// refuse to publish (SQS away) to leave a committed result unpublished.
type recorder struct {
	inner order.Publisher
	mu    sync.Mutex
	fail  bool
	sent  map[string]int
}

var errSQSAway = errors.New("test: SQS is away")

func (r *recorder) PublishBatch(ctx context.Context, bodies [][]byte) error {
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail {
		return errSQSAway
	}
	if err := r.inner.PublishBatch(ctx, bodies); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range bodies {
		var res event.Result
		if err := json.Unmarshal(b, &res); err != nil {
			return err
		}
		r.sent[res.EventID]++
	}
	return nil
}

func (r *recorder) setFail(fail bool) {
	r.mu.Lock()
	r.fail = fail
	r.mu.Unlock()
}

func (r *recorder) count(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent[eventID]
}

// settle waits until the entity's turn is free with nothing in proc, wait or results list:
// every handler that will run has run.
func (h *harness) settle(entity string) {
	h.t.Helper()
	ctx := context.Background()
	testenv.WaitFor(h.t, 30*time.Second, entity+"'s turn free with proc, wait and outbox empty", func() bool {
		lock, err := h.rc.Exists(ctx, lockhandoff.Key(h.prefix, entity, "lock")).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		var n int64
		for _, k := range []string{"proc", "wait", "outbox"} {
			l, err := h.rc.LLen(ctx, lockhandoff.Key(h.prefix, entity, k)).Result()
			if err != nil {
				h.t.Fatal(err)
			}
			n += l
		}
		return lock == 0 && n == 0
	})
}

// A duplicate delivery of a done event publishes nothing: its result went out with the
// event's first run, exactly once.
func TestDuplicateDeliveryPublishesNothingAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{{SKU: "U", Lots: []stock.Lot{onHand("U1", 1, 100, "2027-01-01")}}})
	e := placed("DUP-1", stock.ModeShip, line("1", "U", 3))
	h.submit(e)
	h.settle("DUP-1")
	if n := h.pub.count(e.EventID); n != 1 {
		t.Fatalf("first delivery: result published %d times, want 1", n)
	}
	for range 3 {
		h.submit(e)
	}
	pay := ev("DUP-1", event.PaymentConfirmed, nil)
	h.submit(pay)
	h.submit(pay)
	h.settle("DUP-1")
	if n := h.pub.count(e.EventID); n != 1 {
		t.Fatalf("after three duplicates: result published %d times, want 1", n)
	}
	if n := h.pub.count(pay.EventID); n != 1 {
		t.Fatalf("payment delivered twice: result published %d times, want 1", n)
	}
	h.collect(2)
	if len(h.results[e.EventID]) != 1 || len(h.results[pay.EventID]) != 1 {
		t.Fatalf("results queue holds %d and %d copies, want one each", len(h.results[e.EventID]), len(h.results[pay.EventID]))
	}
}

// A result committed but never published (the holder's publish failed, as if it had
// crashed there) is published before a duplicate delivery of its event is skipped: the
// turn re-runs the envelope left in proc first, and the re-run publishes the results list.
func TestCommittedResultIsPublishedBeforeADuplicateIsSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{{SKU: "V", Lots: []stock.Lot{onHand("V1", 1, 100, "2027-01-01")}}})
	e := placed("DUP-2", stock.ModeShip, line("1", "V", 2))
	h.pub.setFail(true)
	h.submit(e)
	st, err := order.LoadState(context.Background(), h.rc, h.prefix, "DUP-2")
	if err != nil {
		t.Fatal(err)
	}
	if st.Order == nil {
		t.Fatal("the placement was not committed: the test needs a committed, unpublished result")
	}
	if n := h.pub.count(e.EventID); n != 0 {
		t.Fatalf("published %d times while SQS was away", n)
	}
	h.pub.setFail(false)
	h.submit(e) // the duplicate: its turn starts from the envelope left in proc
	h.settle("DUP-2")
	if n := h.pub.count(e.EventID); n < 1 {
		t.Fatal("the committed result was lost: never published")
	}
	h.collect(1)
	s, err := h.led.Snapshot(context.Background(), "V")
	if err != nil {
		t.Fatal(err)
	}
	if got := totals(s); got != (bucketTotals{sellable: 98, allocated: 2}) {
		t.Fatalf("V after a placement, its re-runs and a duplicate: %+v", got)
	}
}
