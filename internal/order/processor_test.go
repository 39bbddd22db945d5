package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/orderdb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// harness runs the order side of a worker in-process: the turn, the ledger, the
// processor and a publisher, against real Redis, PostgreSQL and the SQS emulator.
type harness struct {
	t       *testing.T
	prefix  string
	led     *ledger.Ledger
	turns   *lockhandoff.Handoff
	proc    *order.Processor
	sqs     *sqs.Client
	queues  testenv.Queues
	pub     *recorder
	rc      redis.UniversalClient
	db      *gorm.DB
	results map[string][]event.Result
}

// seed writes SKUs and lots to PostgreSQL, where the ledger loads them from.
func seed(t testing.TB, db *gorm.DB, skus []stock.SKU) {
	t.Helper()
	for _, s := range skus {
		if err := db.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES (?, ?, ?)`, s.SKU, s.SafetyStock, s.Version).Error; err != nil {
			t.Fatal(err)
		}
		for _, l := range s.Lots {
			var bb, arr any
			if l.BestBefore != "" {
				bb = l.BestBefore
			}
			if l.ArrivesAt != "" {
				arr = l.ArrivesAt
			}
			err := db.Exec(`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
				sellable, reserved, allocated, hidden, shipped, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
				s.SKU, l.LotID, l.Kind, l.Good, bb, l.RegSeq, arr, l.ValidFrom, l.ValidTo,
				l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, s.Version).Error
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func onHand(id string, seq, qty int64, bestBefore string) stock.Lot {
	return stock.Lot{LotID: id, Kind: stock.KindOnHand, Good: true, BestBefore: bestBefore, RegSeq: seq,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: qty}
}

func newHarness(t *testing.T, skus []stock.SKU) *harness {
	t.Helper()
	return newHarnessWith(t, skus, harnessOptions{})
}

// harnessOptions change what newHarnessWith builds.
type harnessOptions struct {
	// ledger wraps the processor's ledger (to inject failures).
	ledger func(domain.Ledger) domain.Ledger
	// turns changes the turn's configuration; without it, the turn never quarantines.
	turns func(*lockhandoff.Config)
	// processor changes the processor's configuration.
	processor func(*order.Config)
	// redis is the client of the ledger, the processor and the turns (a proxy's); h.rc
	// stays a direct one.
	redis redis.UniversalClient
}

func newHarnessWith(t *testing.T, skus []stock.SKU, opts harnessOptions) *harness {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	seed(t, db, skus)
	c := testenv.SQS(t)
	h := &harness{t: t, prefix: prefix, rc: rc, db: db, sqs: c, queues: testenv.NewQueues(t, c, 30), results: map[string][]event.Result{}}
	if opts.redis != nil {
		rc = opts.redis
	}
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: h.queues.Results.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	h.pub = &recorder{inner: pub, sent: map[string]int{}}
	h.led, err = ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	dlq := func(ctx context.Context, body []byte, reason string, attrs map[string]string) error {
		return queue.DeadLetter(ctx, c, h.queues.Orders.DLQURL, body, reason, attrs, queue.Keys{})
	}
	var l domain.Ledger = h.led
	if opts.ledger != nil {
		l = opts.ledger(l)
	}
	pc := order.Config{Redis: rc, Ledger: l, Publisher: h.pub, DeadLetter: dlq, Registerer: prometheus.NewRegistry(), Prefix: prefix}
	if opts.processor != nil {
		opts.processor(&pc)
	}
	h.proc, err = order.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	tc := lockhandoff.Config{Prefix: prefix, LockTTL: 2 * time.Second, SweepInterval: 200 * time.Millisecond}
	tc.NeverQuarantine = opts.turns == nil
	if opts.turns != nil {
		opts.turns(&tc)
	}
	tc.Redis, tc.Handler = rc, h.proc
	h.turns, err = lockhandoff.New(tc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.turns.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.turns.Stop(context.Background()); cancel() })
	return h
}

func (h *harness) submit(ev event.Order) {
	h.t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		h.t.Fatal(err)
	}
	dec, err := domain.Decode(body, 0)
	if err != nil {
		h.t.Fatalf("test event invalid: %v", err)
	}
	if _, err := h.turns.Submit(context.Background(), dec.Entity(), body); err != nil {
		h.t.Fatal(err)
	}
}

// collect reads the results queue until want distinct event ids arrived (or 30 s).
func (h *harness) collect(want int) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(h.results) < want && time.Now().Before(deadline) {
		h.receive()
	}
	if len(h.results) < want {
		h.t.Fatalf("got results for %d events, want %d", len(h.results), want)
	}
}

// drain receives results until a receive (a 1 s long poll) finds the queue empty, so that
// every copy of a result published so far is in h.results.
func (h *harness) drain() {
	h.t.Helper()
	for h.receive() > 0 {
		continue // until a receive finds the queue empty
	}
}

// receive takes one batch of results off the queue into h.results and says how many.
func (h *harness) receive() int {
	h.t.Helper()
	out, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(h.queues.Results.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, m := range out.Messages {
		var r event.Result
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
			h.t.Fatalf("result is not JSON: %v", err)
		}
		h.results[r.EventID] = append(h.results[r.EventID], r)
		h.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(h.queues.Results.URL), ReceiptHandle: m.ReceiptHandle})
	}
	return len(out.Messages)
}

func (h *harness) result(id string) event.Result {
	h.t.Helper()
	rs := h.results[id]
	if len(rs) == 0 {
		h.t.Fatalf("no result for %s", id)
	}
	return rs[0]
}

// evSeq numbers the events of ev; tests run in parallel.
var evSeq atomic.Int64

func ev(lcid string, t event.Type, data any) event.Order {
	e := event.Order{EventID: fmt.Sprintf("evt-%s-%d", lcid, evSeq.Add(1)), Type: t, LCID: lcid, OccurredAt: time.Now().UTC()}
	if data != nil {
		e.Data, _ = json.Marshal(data)
	}
	return e
}

func placed(lcid string, mode stock.Mode, lines ...event.Line) event.Order {
	return ev(lcid, event.OrderPlaced, event.OrderData{Mode: mode, TargetDate: "2026-12-01", Lines: lines})
}

func line(id, sku string, qty int64) event.Line { return event.Line{LineID: id, SKU: sku, Qty: qty} }

func TestEveryTransitionAndRejection(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{
		{SKU: "A", SafetyStock: 2, Lots: []stock.Lot{onHand("A1", 1, 5, "2027-03-01"), onHand("A2", 2, 5, "2027-01-01")}},
		{SKU: "B", SafetyStock: 0, Lots: []stock.Lot{onHand("B1", 1, 3, "2027-01-01")}},
	})
	type step struct {
		ev      event.Order
		outcome string
		reason  string
		status  string
	}
	var steps []step
	add := func(e event.Order, outcome, reason, status string) {
		steps = append(steps, step{e, outcome, reason, status})
	}
	// A reserved order that goes all the way: pay, allocate, change lines, ship.
	add(placed("O1", stock.ModeReserve, line("1", "A", 3)), event.Applied, "", event.StatusPlaced)
	add(ev("O1", event.OrderShipped, nil), "", "", "") // parked: unpaid and reserved
	add(ev("O1", event.PaymentConfirmed, nil), event.Applied, "", event.StatusPlaced)
	add(ev("O1", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "A", 2), line("2", "B", 1)}}), event.Applied, "", event.StatusPlaced)
	add(ev("O1", event.OrderAllocateForShipment, nil), event.Applied, "", event.StatusPlaced) // the parked ship follows
	add(ev("O1", event.OrderCancelled, nil), event.Rejected, domain.ReasonInvalidTransition, event.StatusShipped)
	add(ev("O1", event.OrderShipped, nil), event.Applied, "", event.StatusShipped) // a repeat: no-op
	add(placed("O1", stock.ModeShip, line("1", "A", 1)), event.Rejected, domain.ReasonOrderExists, event.StatusShipped)
	// Shortage and safety stock: A has 10 - 3 = 7 sellable left... minus what O1 holds.
	add(placed("O2", stock.ModeReserve, line("1", "A", 50)), event.Rejected, "ERR_SHORTAGE", event.StatusRejected)
	add(placed("O3", stock.ModeShip, line("1", "A", 7)), event.Rejected, "ERR_SAFETY_STOCK", event.StatusRejected)
	add(placed("O4", stock.ModeShip, line("1", "B", 1), line("2", "A", 60)), event.Rejected, "ERR_SHORTAGE", event.StatusRejected)
	add(ev("O2", event.PaymentConfirmed, nil), event.Rejected, domain.ReasonInvalidTransition, event.StatusRejected)
	add(placed("O5", stock.ModeShip, line("1", "NOPE", 1)), event.Rejected, "ERR_UNKNOWN_SKU", event.StatusRejected)
	// Cancel releases; a second cancel is a no-op; a change after cancel is rejected.
	add(placed("O6", stock.ModeShip, line("1", "B", 2)), event.Applied, "", event.StatusPlaced)
	add(ev("O6", event.OrderCancelled, nil), event.Applied, "", event.StatusCancelled)
	add(ev("O6", event.OrderCancelled, nil), event.Applied, "", event.StatusCancelled)
	add(ev("O6", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "B", 1)}}), event.Rejected, domain.ReasonInvalidTransition, event.StatusCancelled)
	add(ev("O6", event.OrderShipped, nil), event.Rejected, domain.ReasonInvalidTransition, event.StatusCancelled)
	// A change that cannot be allocated leaves the order as it was.
	add(placed("O7", stock.ModeReserve, line("1", "B", 1)), event.Applied, "", event.StatusPlaced)
	add(ev("O7", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "B", 1), line("2", "A", 99)}}), event.Rejected, "ERR_SHORTAGE", event.StatusPlaced)

	for _, s := range steps {
		h.submit(s.ev)
	}
	want := 0
	for _, s := range steps {
		if s.outcome != "" {
			want++
		}
	}
	// The parked ship of O1 is applied after allocate_for_shipment: one more result.
	h.collect(want + 1)
	for _, s := range steps {
		if s.outcome == "" {
			continue
		}
		r := h.result(s.ev.EventID)
		if r.Outcome != s.outcome || r.Reason != s.reason {
			t.Errorf("%s %s: got %s/%s, want %s/%s", s.ev.LCID, s.ev.Type, r.Outcome, r.Reason, s.outcome, s.reason)
		}
		if r.Order == nil || r.Order.Status != s.status {
			t.Errorf("%s %s: order %+v, want status %s", s.ev.LCID, s.ev.Type, r.Order, s.status)
		}
	}
	ship := h.result(steps[1].ev.EventID)
	if ship.Outcome != event.Applied || ship.Order.Status != event.StatusShipped {
		t.Errorf("parked ship: %+v", ship)
	}
	alloc := h.result(steps[4].ev.EventID)
	if ship.Seq <= alloc.Seq || ship.Arrival >= alloc.Arrival {
		t.Errorf("parked ship seq %d arrival %d; allocate seq %d arrival %d", ship.Seq, ship.Arrival, alloc.Seq, alloc.Arrival)
	}
	// O7's failed change undid its own allocation of B... and A was never touched.
	o7 := h.result(steps[len(steps)-1].ev.EventID)
	if len(o7.Order.Lines) != 1 || o7.Order.Lines[0].Qty != 1 {
		t.Errorf("O7 changed by a rejected change: %+v", o7.Order)
	}
	// Stock: A holds O1's 2 shipped; B holds O1's 1 shipped and O7's 1 reserved.
	ctx := context.Background()
	a, err := h.led.Snapshot(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.led.Snapshot(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	if got := totals(a); got != (bucketTotals{sellable: 8, shipped: 2}) {
		t.Errorf("A: %+v", got)
	}
	if got := totals(b); got != (bucketTotals{sellable: 1, reserved: 1, shipped: 1}) {
		t.Errorf("B: %+v", got)
	}
	// FEFO: O1's A came from A2 (best before 2027-01-01) first.
	first := h.result(steps[0].ev.EventID)
	if lots := first.Order.Lines[0].Lots; len(lots) != 1 || lots[0].LotID != "A2" {
		t.Errorf("O1 line 1 lots %+v, want A2 first (FEFO)", lots)
	}
}

type bucketTotals struct{ sellable, reserved, allocated, hidden, shipped int64 }

func totals(s stock.SKU) bucketTotals {
	var b bucketTotals
	for _, l := range s.Lots {
		b.sellable += l.Sellable
		b.reserved += l.Reserved
		b.allocated += l.Allocated
		b.hidden += l.Hidden
		b.shipped += l.Shipped
	}
	return b
}

func TestSameEventFiveTimesHasOneEffect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{{SKU: "C", Lots: []stock.Lot{onHand("C1", 1, 100, "2027-01-01")}}})
	e := placed("D1", stock.ModeShip, line("1", "C", 4))
	// Concurrently...
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); h.submit(e) }()
	}
	wg.Wait()
	// ...and one after another.
	for range 5 {
		h.submit(e)
	}
	h.collect(1)
	// Once the order is idle, take every copy of the result off the queue: a redelivery
	// found done publishes nothing, a re-run republishes the same result; no copy may differ.
	h.settle(e.LCID)
	h.drain()
	rs := h.results[e.EventID]
	if len(h.results) != 1 || len(rs) == 0 {
		t.Fatalf("results for %d events (%d of %s), want %s's only", len(h.results), len(rs), e.EventID, e.EventID)
	}
	for _, r := range rs[1:] {
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(rs[0])
		if string(a) != string(b) {
			t.Fatalf("republished result differs:\n%s\n%s", a, b)
		}
	}
	s, err := h.led.Snapshot(context.Background(), "C")
	if err != nil {
		t.Fatal(err)
	}
	if got := totals(s); got != (bucketTotals{sellable: 96, allocated: 4}) {
		t.Fatalf("C after 10 deliveries of one placement: %+v", got)
	}
}

func TestOrderLostFromRedisIsRestoredFromPostgres(t *testing.T) {
	t.Parallel()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	seed(t, db, []stock.SKU{{SKU: "R", Lots: []stock.Lot{onHand("R1", 1, 10, "2027-01-01")}}})
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.Results.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	// What PostgreSQL holds of an order whose Redis state is gone: placed, reserved, seq 3.
	lines := `[{"line_id":"1","sku":"R","qty":2,"lots":[{"lot_id":"R1","qty":2}]}]`
	if err := db.Exec(`INSERT INTO orders (lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id)
		VALUES ('LOST-1', 'placed', 'reserved', false, 'reserve', '2026-12-01', ?::jsonb, 3, 'x')`, lines).Error; err != nil {
		t.Fatal(err)
	}
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := order.New(order.Config{Redis: rc, Ledger: led, Publisher: pub, Prefix: prefix, Loader: orderdb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := lockhandoff.New(lockhandoff.Config{Redis: rc, Prefix: prefix, Handler: proc, NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(ev("LOST-1", event.PaymentConfirmed, nil))
	if _, err := turns.Submit(context.Background(), "LOST-1", body); err != nil {
		t.Fatal(err)
	}
	st, err := order.LoadState(context.Background(), rc, prefix, "LOST-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Order == nil || !st.Order.Paid || st.Seq != 4 || len(st.Parked) != 0 {
		t.Fatalf("payment on a restored order: %+v (order %+v), want paid at seq 4", st, st.Order)
	}
	if st.Order.Lines[0].Lots[0].LotID != "R1" || st.Order.TargetDate != "2026-12-01" {
		t.Fatalf("restored order lost its lines or date: %+v", st.Order)
	}
}
