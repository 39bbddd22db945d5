package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// outcomes counts what Submit answered, for a test that waits for one.
type outcomes struct {
	intake.Turns
	full, failed atomic.Int64
}

func (o *outcomes) Submit(ctx context.Context, entity string, envelope []byte) (lockhandoff.Outcome, error) {
	out, err := o.Turns.Submit(ctx, entity, envelope)
	switch {
	case errors.Is(err, lockhandoff.ErrQueueFull):
		o.full.Add(1)
	case err != nil:
		o.failed.Add(1)
	}
	return out, err
}

// consume runs an orders-queue consumer whose handler is an intake.Worker over turns until
// the test ends; a Retry comes back after a second. It returns the consumer's metrics.
func (h *harness) consume(turns intake.Turns) *prometheus.Registry {
	h.t.Helper()
	w := &intake.Worker{Turns: turns, FullBackoff: time.Second, Log: zaptest.NewLogger(h.t)}
	reg := prometheus.NewRegistry()
	cons, err := queue.NewConsumer(queue.ConsumerConfig{
		Client:   h.sqs,
		QueueURL: h.queues.Orders.URL, DLQURL: h.queues.Orders.DLQURL, WaitTimeSeconds: 1,
		RetryBase: time.Second, RetryMax: time.Second,
		ShutdownBudget: 5 * time.Second, Registerer: reg, Logger: zaptest.NewLogger(h.t),
		Handler: w.Handle,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cons.Run(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return reg
}

// send puts an event on the orders queue.
func (h *harness) send(e event.Order) {
	h.t.Helper()
	body, err := json.Marshal(e)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.queues.Orders.URL), MessageBody: aws.String(string(body))}); err != nil {
		h.t.Fatal(err)
	}
}

// ordersHeld is the number of messages the orders queue holds, visible or in flight.
func (h *harness) ordersHeld() int {
	h.t.Helper()
	out, err := h.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(h.queues.Orders.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, k := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		var v int
		json.Unmarshal([]byte(out.Attributes[string(k)]), &v)
		n += v
	}
	return n
}

// gate holds the handler of one event until opened: its turn stays taken, and what
// arrives meanwhile queues behind it.
type gate struct {
	eventID        string
	held, open     chan struct{}
	heldOnce, done sync.Once
}

func newGate(eventID string) *gate {
	return &gate{eventID: eventID, held: make(chan struct{}), open: make(chan struct{})}
}

// release lets the held handler go on; call it in a cleanup registered after the
// consumer's, so that a failed test does not wait for a handler that waits for it.
func (g *gate) release() { g.done.Do(func() { close(g.open) }) }

func (g *gate) wrap(h lockhandoff.Handler) lockhandoff.Handler {
	return lockhandoff.Funcs{OnStep: func(ctx context.Context, t lockhandoff.Turn, envelope []byte) (lockhandoff.Result, error) {
		var e struct {
			EventID string `json:"event_id"`
		}
		json.Unmarshal(envelope, &e)
		if e.EventID == g.eventID {
			g.heldOnce.Do(func() { close(g.held) })
			<-g.open
		}
		return h.Step(ctx, t, envelope)
	}, OnQuarantine: h.Quarantine}
}

// An order whose wait list is at its byte bound answers FULL: the worker leaves the
// message in SQS, and its redelivery, once the list drained, applies it. Every event gets
// exactly one result, and the byte count is gone with the wait list.
//
// Broken variant tried: take.lua without the byte check: the third event was queued and
// no FULL was ever seen.
func TestWaitAtItsByteBoundKeepsTheMessageInSQS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{{SKU: "WB", Version: 1, Lots: []stock.Lot{onHand("WB1", 1, 100, "2027-01-01")}}})
	prefix := h.prefix + "-bytes"
	proc, err := order.New(order.Config{Redis: h.rc, Ledger: h.led, Publisher: h.pub, Registerer: prometheus.NewRegistry(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	e0 := placed("WB-1", stock.ModeReserve, line("1", "WB", 1))
	e1 := ev("WB-1", event.PaymentConfirmed, nil)
	e2 := ev("WB-1", event.OrderCancelled, nil)
	b1, _ := json.Marshal(e1)
	g := newGate(e0.EventID)
	// Room for e1's entry ("<13-digit ms>:" and its body) and not for a second one.
	turns, err := lockhandoff.New(lockhandoff.Config{Redis: h.rc, Prefix: prefix, MaxWaitBytes: 14 + len(b1) + 10, Handler: g.wrap(proc), NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = turns.Stop(context.Background()) })
	seen := &outcomes{Turns: turns}
	h.consume(seen)
	t.Cleanup(g.release)

	h.send(e0)
	<-g.held
	h.send(e1)
	testenv.WaitFor(t, 30*time.Second, "e1 queued", func() bool {
		return h.rc.LLen(context.Background(), lockhandoff.Key(prefix, "WB-1", "wait")).Val() == 1
	})
	h.send(e2)
	testenv.WaitFor(t, 30*time.Second, "a FULL answer", func() bool { return seen.full.Load() > 0 })
	// e2 is nowhere but in SQS: not in Redis, no result.
	if n := h.rc.LLen(context.Background(), lockhandoff.Key(prefix, "WB-1", "wait")).Val(); n != 1 {
		t.Fatalf("wait holds %d entries after FULL, want e1 alone", n)
	}
	if n := h.pub.count(e2.EventID); n != 0 {
		t.Fatalf("e2 has %d results while its order was full", n)
	}
	g.release()
	h.collect(3)
	// The results queue can hand a result over before the publisher that sent it has
	// returned and counted it: the count is awaited, then checked.
	for _, e := range []event.Order{e0, e1, e2} {
		testenv.WaitFor(t, 30*time.Second, string(e.Type)+" counted", func() bool { return h.pub.count(e.EventID) >= 1 })
		if n := h.pub.count(e.EventID); n != 1 || len(h.results[e.EventID]) != 1 {
			t.Errorf("%s: %d results published, %d received, want 1", e.Type, n, len(h.results[e.EventID]))
		}
	}
	testenv.WaitFor(t, 30*time.Second, "the orders queue empty", func() bool { return h.ordersHeld() == 0 })
	if n := h.rc.Exists(context.Background(), lockhandoff.Key(prefix, "WB-1", "waitbytes")).Val(); n != 0 {
		t.Error("the byte count outlived the wait list")
	}
}
