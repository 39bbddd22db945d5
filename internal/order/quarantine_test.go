package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
)

// flakyLedger fails every allocation and change whose op id contains fail, while on: a bug or a
// dependency that fails the same way on every run of one event.
type flakyLedger struct {
	domain.Ledger
	fail  string
	on    atomic.Bool
	calls atomic.Int64
}

var errInjected = errors.New("test: injected ledger failure")

// Apply fails an allocation or a change (an order.lines_changed's operation on a SKU)
// whose op id contains fail, while on.
func (f *flakyLedger) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	var opID string
	inner, _ := stock.Unfenced(op)
	switch r := inner.(type) {
	case stock.AllocateRequest:
		opID = r.OpID
	case stock.ChangeRequest:
		opID = r.OpID
	}
	if f.on.Load() && opID != "" && strings.Contains(opID, f.fail) {
		f.calls.Add(1)
		return stock.Result{}, errInjected
	}
	return f.Ledger.Apply(ctx, op)
}

// deadLetters receives the orders DLQ until n messages came (or 30 s), deleting them.
func (h *harness) deadLetters(n int) []dead {
	h.t.Helper()
	var out []dead
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		r, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(h.queues.Orders.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, m := range r.Messages {
			d := dead{body: aws.ToString(m.Body), attrs: map[string]string{}}
			for k, a := range m.MessageAttributes {
				d.attrs[k] = aws.ToString(a.StringValue)
			}
			d.reason = d.attrs[queue.AttrDLQReason]
			out = append(out, d)
			h.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(h.queues.Orders.DLQURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(out) < n {
		h.t.Fatalf("dead letters: got %d, want %d", len(out), n)
	}
	return out
}

type dead struct {
	body, reason string
	attrs        map[string]string
}

// redrive submits a dead-lettered body again, as `junbanctl dlq redrive` sends it back.
func (h *harness) redrive(body string) {
	h.t.Helper()
	var o event.Order
	if err := json.Unmarshal([]byte(body), &o); err != nil {
		h.t.Fatal(err)
	}
	h.submit(o)
}

// reconcile applies every result collected to PostgreSQL and compares it with Redis.
func (h *harness) reconcile() persist.ReconcileReport {
	h.t.Helper()
	var all []event.Result
	for _, rs := range h.results {
		all = append(all, rs...)
	}
	if _, err := persist.Apply(context.Background(), h.db, all); err != nil {
		h.t.Fatal(err)
	}
	rep, err := persist.Reconcile(context.Background(), persist.ReconcileConfig{DB: h.db, SKUs: h.led, Orders: order.NewStore(h.rc, h.prefix)})
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

func lotOf(t *testing.T, led *ledger.Ledger, sku string) stock.Lot {
	t.Helper()
	s, err := led.Snapshot(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return s.Lots[0]
}

// An event that fails on every run is quarantined after exactly MaxAttempts runs: its
// first line's allocation is undone, the DLQ has it with its reason and last error, the
// order's later event waits for it (parked), and its redrive applies it once, with fresh
// op ids, after which Redis and PostgreSQL agree.
// Broken variants tried: without the undo, A kept 3 allocated after the quarantine;
// without State.Requeued, the redrive's first line answered the remembered (undone)
// allocation and A ended with 3 allocated to the order but sellable 10.
func TestFailingEventIsQuarantinedThenRedrivenOnce(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	flaky := &flakyLedger{fail: ":2:"}
	flaky.on.Store(true)
	h := newHarnessWith(t, []stock.SKU{
		{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}},
		{SKU: "B", Lots: []stock.Lot{onHand("B1", 1, 10, "2027-01-01")}},
	}, harnessOptions{
		ledger: func(l domain.Ledger) domain.Ledger { flaky.Ledger = l; return flaky },
		turns: func(c *lockhandoff.Config) {
			c.MaxAttempts = maxAttempts
			c.HandlerRetries = 1
			c.QuarantineMinAge = -1
		},
	})
	place := placed("Q1", stock.ModeShip, line("1", "A", 3), line("2", "B", 2))
	pay := ev("Q1", event.PaymentConfirmed, nil)
	h.submit(place)
	h.submit(pay)

	dl := h.deadLetters(1)
	if !strings.HasPrefix(dl[0].reason, order.ReasonMaxAttempts+": 3 failed runs") || !strings.Contains(dl[0].reason, errInjected.Error()) {
		t.Fatalf("dlq reason %q", dl[0].reason)
	}
	a := dl[0].attrs
	firstAt, err1 := time.Parse(time.RFC3339Nano, a[queue.AttrFirstFailure])
	lastAt, err2 := time.Parse(time.RFC3339Nano, a[queue.AttrLastFailure])
	if a[queue.AttrAttempts] != "3" || err1 != nil || err2 != nil || lastAt.Before(firstAt) {
		t.Fatalf("dlq attributes %v", a)
	}
	// Each run reached the failing allocation once, and so did the quarantine's replay.
	if got := flaky.calls.Load(); got != maxAttempts+1 {
		t.Errorf("the failing allocation ran %d times, want %d", got, maxAttempts+1)
	}
	h.collect(1) // the quarantine's result
	comp := h.result(place.EventID + "~q1")
	if comp.Outcome != event.Rejected || comp.Reason != order.ReasonQuarantined {
		t.Fatalf("quarantine result %+v", comp)
	}
	if a := lotOf(t, h.led, "A"); a.Sellable != 10 || a.Allocated != 0 {
		t.Fatalf("A after the quarantine: %+v (the first line's allocation must be undone)", a)
	}
	st, err := h.proc.Load(context.Background(), "Q1")
	if err != nil || st.Order != nil || len(st.Parked) != 1 {
		t.Fatalf("state after the quarantine: %+v %v (the payment waits, parked)", st, err)
	}

	flaky.on.Store(false)
	h.redrive(dl[0].body)
	h.collect(3)
	if r := h.result(place.EventID); r.Outcome != event.Applied {
		t.Fatalf("redriven placement: %+v", r)
	}
	if r := h.result(pay.EventID); r.Outcome != event.Applied || !r.Order.Paid {
		t.Fatalf("payment after the redrive: %+v", r)
	}
	if a, b := lotOf(t, h.led, "A"), lotOf(t, h.led, "B"); a.Sellable != 7 || a.Allocated != 3 || b.Sellable != 8 || b.Allocated != 2 {
		t.Fatalf("after the redrive: A %+v B %+v", a, b)
	}
	// A second redrive (a duplicate DLQ copy) changes nothing.
	h.redrive(dl[0].body)
	<-h.turns.Idle()
	if a := lotOf(t, h.led, "A"); a.Allocated != 3 {
		t.Fatalf("after a second redrive: A %+v", a)
	}
	if rep := h.reconcile(); len(rep.Drifts) != 0 {
		t.Fatalf("drift after the redrive: %v", rep.Drifts)
	}
}

// A result that cannot be published, whatever the run: the event is quarantined with its
// effect kept (it was committed), and the result stays in the results list until SQS takes it,
// here at the redrive, a duplicate. Never neither: the stock stays allocated and the result
// arrives. Broken variant tried: with the duplicate path publishing nothing, the result
// never arrived.
func TestUnpublishableResultIsKeptThroughTheQuarantine(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}}}, harnessOptions{
		turns: func(c *lockhandoff.Config) { c.MaxAttempts = 2; c.HandlerRetries = 1; c.QuarantineMinAge = -1 },
	})
	h.pub.mu.Lock()
	h.pub.fail = true
	h.pub.mu.Unlock()
	place := placed("Q2", stock.ModeShip, line("1", "A", 4))
	h.submit(place)
	dl := h.deadLetters(1)
	if !strings.HasPrefix(dl[0].reason, order.ReasonMaxAttempts) || !strings.Contains(dl[0].reason, "committed") {
		t.Fatalf("dlq reason %q", dl[0].reason)
	}
	if a := lotOf(t, h.led, "A"); a.Allocated != 4 {
		t.Fatalf("A after the quarantine: %+v (a committed effect stays)", a)
	}
	h.pub.mu.Lock()
	h.pub.fail = false
	h.pub.mu.Unlock()
	h.redrive(dl[0].body)
	h.collect(1)
	if r := h.result(place.EventID); r.Outcome != event.Applied {
		t.Fatalf("result %+v", r)
	}
	if a := lotOf(t, h.led, "A"); a.Allocated != 4 {
		t.Fatalf("A after the redrive: %+v", a)
	}
	if rep := h.reconcile(); len(rep.Drifts) != 0 {
		t.Fatalf("drift: %v", rep.Drifts)
	}
}

// lostReplies answers the first n adjustments with an error after they applied: a
// reply lost on every run of the event.
type lostReplies struct {
	domain.Ledger
	n     int64
	calls atomic.Int64
}

func (l *lostReplies) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	res, err := l.Ledger.Apply(ctx, op)
	if _, adjust := unfenced(op).(stock.AdjustRequest); adjust && l.calls.Add(1) <= l.n {
		return stock.Result{}, errInjected
	}
	return res, err
}

// An inventory event whose one operation applied while every run failed is completed by
// the quarantine (an adjustment cannot be undone): the stock stays, its result reaches
// SQS, and a redrive is a duplicate. Broken variant tried: treated like an order event
// (undone, with fresh op ids), the redrive adjusted A1 a second time.
func TestQuarantinedAdjustmentIsCompleted(t *testing.T) {
	t.Parallel()
	lost := &lostReplies{n: 2}
	h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}}}, harnessOptions{
		ledger: func(l domain.Ledger) domain.Ledger { lost.Ledger = l; return lost },
		turns:  func(c *lockhandoff.Config) { c.MaxAttempts = 2; c.HandlerRetries = 1; c.QuarantineMinAge = -1 },
	})
	adj := ev("", event.InventoryAdjusted, event.InventoryAdjustedData{SKU: "A", LotID: "A1", Delta: 5, Reason: "count"})
	h.submit(adj)
	dl := h.deadLetters(1)
	if !strings.HasPrefix(dl[0].reason, order.ReasonMaxAttempts) || !strings.Contains(dl[0].reason, "completed") {
		t.Fatalf("dlq reason %q", dl[0].reason)
	}
	h.collect(1)
	if r := h.result(adj.EventID); r.Outcome != event.Applied {
		t.Fatalf("result %+v", r)
	}
	h.redrive(dl[0].body)
	<-h.turns.Idle()
	if a := lotOf(t, h.led, "A"); a.Sellable != 15 {
		t.Fatalf("A: %+v (the adjustment applies once)", a)
	}
	if rep := h.reconcile(); len(rep.Drifts) != 0 {
		t.Fatalf("drift: %v", rep.Drifts)
	}
}

// The order's later events apply, in order, once the failing one is quarantined: a line
// change that fails on every run is undone and dead-lettered, the cancel behind it releases
// what the placement holds, and the redriven change then finds the order cancelled. The
// change on A, which applied before B's failed, both releases (line 1) and allocates
// (line 2): the quarantine moves it back in one undo. Broken variant tried: an undo of one
// pair of buckets per operation (the rollback before Undo's Back): the quarantine failed
// on A's change and nothing was dead-lettered.
func TestLaterEventsApplyAfterAQuarantine(t *testing.T) {
	t.Parallel()
	flaky := &flakyLedger{fail: ":B:change"}
	h := newHarnessWith(t, []stock.SKU{
		{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}},
		{SKU: "B", Lots: []stock.Lot{onHand("B1", 1, 10, "2027-01-01")}},
	}, harnessOptions{
		ledger: func(l domain.Ledger) domain.Ledger { flaky.Ledger = l; return flaky },
		turns:  func(c *lockhandoff.Config) { c.MaxAttempts = 2; c.HandlerRetries = 1; c.QuarantineMinAge = -1 },
	})
	place := placed("Q4", stock.ModeShip, line("1", "A", 2), line("2", "A", 2))
	h.submit(place)
	h.collect(1)
	flaky.on.Store(true)
	change := ev("Q4", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "A", 1), line("2", "A", 6), line("3", "B", 1)}})
	cancel := ev("Q4", event.OrderCancelled, nil)
	h.submit(change)
	h.submit(cancel)
	dl := h.deadLetters(1)
	h.collect(3) // the quarantine's result, then the cancel's
	if r := h.result(cancel.EventID); r.Outcome != event.Applied || r.Order.Status != event.StatusCancelled {
		t.Fatalf("cancel after the quarantine: %+v", r)
	}
	if r := h.result(change.EventID + "~q1"); r.Reason != order.ReasonQuarantined {
		t.Fatalf("quarantine result: %+v", r)
	}
	if a := lotOf(t, h.led, "A"); a.Sellable != 10 || a.Allocated != 0 {
		t.Fatalf("after the cancel: A %+v (the change's raise is undone, the cancel released the rest)", a)
	}
	flaky.on.Store(false)
	h.redrive(dl[0].body)
	h.collect(4)
	if r := h.result(change.EventID); r.Outcome != event.Rejected || r.Reason != domain.ReasonInvalidTransition {
		t.Fatalf("redriven change: %+v", r)
	}
	if rep := h.reconcile(); len(rep.Drifts) != 0 {
		t.Fatalf("drift: %v", rep.Drifts)
	}
}

// A step whose result would not fit in the results queue's messages is not committed: the
// event is quarantined at its first run with ERR_RESULT_TOO_LARGE and what it allocated is
// undone, and the order's next event applies. Broken variant tried: without the size check,
// the commit went through and the result waited in the results list for ever.
func TestResultTooLargeIsQuarantinedAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01"), onHand("A2", 2, 10, "2027-02-01")}}}, harnessOptions{
		turns:     func(c *lockhandoff.Config) {},
		processor: func(c *order.Config) { c.MaxResultBytes = 900 },
	})
	big := placed("Q5", stock.ModeShip, line("1", "A", 15)) // two lots: a result over 900 bytes
	h.submit(big)
	dl := h.deadLetters(1)
	if !strings.HasPrefix(dl[0].reason, order.ReasonResultTooLarge+": the result of "+big.EventID) {
		t.Fatalf("dlq reason %q", dl[0].reason)
	}
	if a := lotOf(t, h.led, "A"); a.Allocated != 0 || a.Sellable != 10 {
		t.Fatalf("A after the quarantine: %+v (nothing stays allocated)", a)
	}
	small := placed("Q6", stock.ModeShip, line("1", "A", 1))
	h.submit(small)
	h.collect(2) // the quarantine's own (small) result, and Q6's
	if r := h.result(small.EventID); r.Outcome != event.Applied {
		t.Fatalf("next placement: %+v", r)
	}
}

// A quarantine whose record's name is held by another record commits nothing and says
// so: it fails (the event stays in its turn, quarantined again by its next run), logs at
// error level, and never claims its undos were recorded. Once the name is free, the next
// run commits the record. No sender can take the name now (event.OwnMark); a done marker
// from before could. Broken variant tried: with commit's "done already" taken as success,
// as it was, the quarantine logged "its ledger operations were undone", no record was
// committed, and the state never counted the quarantine.
func TestQuarantineWhoseRecordNameIsTakenFailsLoudly(t *testing.T) {
	t.Parallel()
	flaky := &flakyLedger{fail: ":2:"}
	flaky.on.Store(true)
	core, logs := observer.New(zapcore.WarnLevel)
	h := newHarnessWith(t, []stock.SKU{
		{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 10, "2027-01-01")}},
		{SKU: "B", Lots: []stock.Lot{onHand("B1", 1, 10, "2027-01-01")}},
	}, harnessOptions{
		ledger: func(l domain.Ledger) domain.Ledger { flaky.Ledger = l; return flaky },
		turns: func(c *lockhandoff.Config) {
			c.MaxAttempts = 2
			c.HandlerRetries = 1
			c.QuarantineMinAge = -1
		},
		processor: func(c *order.Config) { c.Logger = zap.New(core) },
	})
	place := placed("Q1", stock.ModeShip, line("1", "A", 3), line("2", "B", 2))
	taken := order.DoneKey(h.prefix, "Q1", place.EventID+event.OwnMark+"q1")
	if err := h.rc.Set(context.Background(), taken, `{"event_id":"`+place.EventID+`~q1","outcome":"applied"}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	h.submit(place)

	h.deadLetters(1)
	failed := func() bool { return logs.FilterMessageSnippet("its record's name is taken").Len() > 0 }
	for deadline := time.Now().Add(30 * time.Second); !failed() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !failed() {
		t.Fatalf("no error says the quarantine could not commit; logs: %v", logs.All())
	}
	if n := logs.FilterMessageSnippet("ledger operations were undone").Len(); n != 0 {
		t.Fatalf("the quarantine claimed its undos were recorded %d times", n)
	}
	if st, err := h.proc.Load(context.Background(), "Q1"); err != nil || st.Requeued[place.EventID] != 0 {
		t.Fatalf("state while the name is taken: %+v %v (no quarantine may be counted)", st, err)
	}

	// The name freed, the next run commits the record.
	if err := h.rc.Del(context.Background(), taken).Err(); err != nil {
		t.Fatal(err)
	}
	h.collect(1)
	if comp := h.result(place.EventID + "~q1"); comp.Outcome != event.Rejected || comp.Reason != order.ReasonQuarantined {
		t.Fatalf("quarantine result %+v", comp)
	}
	if st, err := h.proc.Load(context.Background(), "Q1"); err != nil || st.Requeued[place.EventID] != 1 {
		t.Fatalf("state after the quarantine: %+v %v", st, err)
	}
	if a := lotOf(t, h.led, "A"); a.Sellable != 10 || a.Allocated != 0 {
		t.Fatalf("A after the quarantine: %+v (the first line's allocation must be undone)", a)
	}
}
