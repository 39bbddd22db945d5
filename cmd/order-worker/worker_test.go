package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/expiry"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// fleet is a set of order-worker processes sharing one test's Redis prefix, schema and queues.
type fleet struct {
	t       *testing.T
	bin     string
	env     []string
	rc      redis.UniversalClient
	prefix  string
	db      *gorm.DB
	sqs     *sqs.Client
	queues  testenv.Queues
	procs   []*testenv.Proc
	results map[string][]event.Result
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, bin: testenv.Binary(t, "order-worker"), results: map[string][]event.Result{}}
	f.rc, f.prefix = testenv.Redis(t)
	pgURL := testenv.PostgresURL(t)
	var err error
	if f.db, err = openDB(pgURL); err != nil {
		t.Fatal(err)
	}
	f.sqs = testenv.SQS(t)
	f.queues = testenv.NewQueues(t, f.sqs, 20)
	f.env = append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+f.prefix,
		"DATABASE_URL="+pgURL,
		"JUNBAN_ORDERS_QUEUE="+f.queues.Orders.URL,
		"JUNBAN_ORDERS_DLQ="+f.queues.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+f.queues.Results.URL,
		"JUNBAN_RESULTS_DLQ="+f.queues.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1",
		"JUNBAN_LOCK_TTL=1s",
		"JUNBAN_HANDLER_DEADLINE=10s",
		"JUNBAN_SWEEP_INTERVAL=300ms",
		"JUNBAN_SHUTDOWN_BUDGET=5s",
		"JUNBAN_CONCURRENCY=8",
		"JUNBAN_LOG_LEVEL=warn",
	)
	return f
}

func (f *fleet) start(n int) {
	for range n {
		f.procs = append(f.procs, testenv.Start(f.t, fmt.Sprintf("order-worker-%d", len(f.procs)), f.bin, f.env))
	}
}

// seed imports the workload's inventory into the test schema.
func (f *fleet) seed(w loadgen.Workload) {
	f.t.Helper()
	if err := loadgen.Import(context.Background(), f.db, w.Inventory); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) send(events []event.Order) {
	f.t.Helper()
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: f.sqs, QueueURL: f.queues.Orders.URL})
	if err != nil {
		f.t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	var bodies [][]byte
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			f.t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	for i := 0; i < len(bodies); i += 10 {
		if err := pub.PublishBatch(context.Background(), bodies[i:min(i+10, len(bodies))]); err != nil {
			f.t.Fatal(err)
		}
	}
}

// sendWorkload sends w's events, holding at each of its gates until the results the
// gate waits for are in (a new SKU's registration before its lots, its lots before the
// orders on it), as loadgen.Run does.
func (f *fleet) sendWorkload(w loadgen.Workload) {
	f.t.Helper()
	from := 0
	for _, g := range w.Gates {
		f.send(w.Events[from:g.At])
		want := map[string]bool{}
		for _, id := range g.After {
			want[id] = true
		}
		f.collect(want, time.Minute, nil)
		from = g.At
	}
	f.send(w.Events[from:])
}

// collect reads results until every id in want has one, calling progress with the count.
func (f *fleet) collect(want map[string]bool, timeout time.Duration, progress func(int)) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	have := func() int {
		n := 0
		for id := range want {
			if len(f.results[id]) > 0 {
				n++
			}
		}
		return n
	}
	if want == nil {
		f.receive()
		return
	}
	for have() < len(want) {
		if time.Now().After(deadline) {
			var missing []string
			for id := range want {
				if len(f.results[id]) == 0 {
					missing = append(missing, id)
				}
			}
			slices.Sort(missing)
			f.t.Fatalf("results for %d of %d events; missing e.g. %v", have(), len(want), missing[:min(10, len(missing))])
		}
		f.receive()
		if progress != nil {
			progress(have())
		}
	}
}

// receive takes one batch of results off the results queue.
func (f *fleet) receive() {
	out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(f.queues.Results.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		var r event.Result
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
			f.t.Fatalf("result is not JSON: %v", err)
		}
		f.results[r.EventID] = append(f.results[r.EventID], r)
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(del) > 0 {
		f.sqs.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(f.queues.Results.URL), Entries: del})
	}
}

func distinctIDs(events []event.Order) map[string]bool {
	ids := map[string]bool{}
	for _, e := range events {
		ids[e.EventID] = true
	}
	return ids
}

// ampleSpec makes a workload whose stock never runs short, so that every order's outcome
// is independent of how the orders interleave across workers, and lots are taken FEFO
// from the same lot whatever the interleaving: the run must equal the model exactly.
// The warehouse feed runs beside the orders with FeedCommutes (see inArrivalOrder).
func ampleSpec(run string, orders int) loadgen.Spec {
	s := loadgen.DefaultSpec(run)
	s.FeedCommutes = true
	s.Orders = orders
	s.SKUs = 8
	s.StockPerLot = 1_000_000
	s.SafetyStock = 0
	s.ExtraChanges = 13
	s.ShuffleShare = 0.4
	s.DuplicateShare = 0.15
	return s
}

// verify compares the run with a replay of the same events, one order at a time in the
// order they reached each order's turn, through the plain-Go reference model.
func (f *fleet) verify(w loadgen.Workload) {
	f.t.Helper()
	ctx := context.Background()
	f.settle()
	byID := map[string]event.Order{}
	for _, e := range w.Events {
		byID[e.EventID] = e
	}
	// The expiries are the workers' own events: each comes into the model from its result,
	// at its arrival in its order's turn, as the worker submitted it (expiry.Event).
	for id, rs := range f.results {
		if _, sent := byID[id]; !sent && rs[0].Type == event.OrderReservationExpired {
			byID[id] = expiryOf(f.t, rs[0])
		}
	}
	// Every copy of a result is the same result.
	var firsts []event.Result
	for id, rs := range f.results {
		if _, ok := byID[id]; !ok {
			f.t.Errorf("result for an event never sent: %s", id)
			continue
		}
		a, _ := json.Marshal(rs[0])
		for _, r := range rs[1:] {
			if b, _ := json.Marshal(r); string(a) != string(b) {
				f.t.Errorf("event %s has two different results:\n%s\n%s", id, a, b)
			}
		}
		firsts = append(firsts, rs[0])
	}
	events, err := inArrivalOrder(firsts, byID)
	if err != nil {
		f.t.Fatal(err)
	}
	model := stock.NewModel(w.Loader())
	states, want, err := domain.Replay(ctx, model, domain.Policy{}, events, time.Now())
	if err != nil {
		f.t.Fatal(err)
	}
	wantByID := map[string]event.Result{}
	for _, r := range want {
		wantByID[r.EventID] = r
	}
	for _, got := range firsts {
		exp, ok := wantByID[got.EventID]
		if !ok {
			f.t.Errorf("%s: the model parks it forever, the run gave %s", got.EventID, got.Outcome)
			continue
		}
		if got.Outcome != exp.Outcome || got.Reason != exp.Reason || got.Seq != exp.Seq {
			f.t.Errorf("%s: run %s/%s seq %d, model %s/%s seq %d", got.EventID, got.Outcome, got.Reason, got.Seq, exp.Outcome, exp.Reason, exp.Seq)
		}
		if a, b := jsonOf(got.Order), jsonOf(exp.Order); a != b {
			f.t.Errorf("%s: order\nrun   %s\nmodel %s", got.EventID, a, b)
		}
		if a, b := jsonOf(unversioned(got.Moves)), jsonOf(unversioned(exp.Moves)); a != b {
			f.t.Errorf("%s: moves\nrun   %s\nmodel %s", got.EventID, a, b)
		}
	}
	for _, lcid := range w.Orders {
		st, err := order.LoadState(ctx, f.rc, f.prefix, lcid)
		if err != nil {
			f.t.Fatal(err)
		}
		if a, b := jsonOf(st.Order), jsonOf(states[lcid].Order); a != b {
			f.t.Errorf("%s final state\nredis %s\nmodel %s", lcid, a, b)
		}
		if len(st.Parked) != len(states[lcid].Parked) {
			f.t.Errorf("%s: %d parked in redis, %d in the model", lcid, len(st.Parked), len(states[lcid].Parked))
		}
	}
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix, Loader: inventorydb.PGLoader{DB: f.db}})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, sku := range w.SKUs() {
		got, err := led.Snapshot(ctx, sku)
		if err != nil {
			f.t.Fatalf("%s: %v", sku, err)
		}
		exp, err := model.Snapshot(ctx, sku)
		if err != nil {
			f.t.Fatal(err)
		}
		if a, b := jsonOf(got.Lots), jsonOf(exp.Lots); a != b {
			f.t.Errorf("%s lots\nredis %s\nmodel %s", sku, a, b)
		}
	}
}

// expiryOf is the order.reservation_expired a worker submitted for r: its hold is in its
// event id (event.ExpiryEventID).
func expiryOf(t *testing.T, r event.Result) event.Order {
	t.Helper()
	parts := strings.SplitN(r.EventID, ":", 3)
	us, err := strconv.ParseInt(parts[min(1, len(parts)-1)], 10, 64)
	if err != nil || len(parts) != 3 || event.ExpiryEventID(r.LCID, time.UnixMicro(us)) != r.EventID {
		t.Fatalf("%s is no expiry event id of %s", r.EventID, r.LCID)
	}
	body, err := expiry.Event(r.LCID, time.UnixMicro(us))
	if err != nil {
		t.Fatal(err)
	}
	var o event.Order
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// inArrivalOrder is domain.InArrivalOrder with the SKUs' entities (the warehouse's
// events, "sku:<sku>") replayed before the orders'.
//
// The model replays one entity at a time, while in the run a SKU's warehouse events and
// the orders on it interleave on the SKU's ledger. The comparison stays exact because
// the feed's events commute with the orders' in this workload (ample stock,
// loadgen.Spec.FeedCommutes): no hold, damage or safety stock change can make an
// allocation short; new lots and receipts carry a best-before after every lot their SKU
// has and recalls spare each SKU's first lot in FEFO order, so every order takes the same
// lot whichever came first; returns run in their order's own entity. What does not
// commute is a new SKU: an order on it before its registration is refused. The run
// orders those by its gates (sendWorkload: the registration, then the lots, then the
// orders), and the replay by putting the SKUs' entities first. Each entity's own events
// keep the order they reached its turn in, so what is compared (outcome, reason, seq,
// order, moves, final states and lots) is as strict as before. Broken variants tried:
// the orders' entities replayed first (the model refuses the orders on the new SKU with
// ERR_UNKNOWN_SKU), and the feed without FeedCommutes (a recall of a SKU's first lot
// sends the model's orders to another lot).
func inArrivalOrder(results []event.Result, sent map[string]event.Order) ([]domain.Event, error) {
	events, err := domain.InArrivalOrder(results, sent)
	if err != nil {
		return nil, err
	}
	isSKU := func(e domain.Event) bool { return strings.HasPrefix(e.Entity(), domain.SKUEntity("")) }
	out := make([]domain.Event, 0, len(events))
	for _, first := range []bool{true, false} {
		for _, e := range events {
			if isSKU(e) == first {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// settle waits until the orders queue is empty, no entity holds a turn or a backlog,
// and no further result arrives: late duplicates are checked too.
func (f *fleet) settle() {
	f.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for quiet := 0; quiet < 3; {
		if time.Now().After(deadline) {
			f.t.Fatal("the fleet did not settle")
		}
		attrs, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(f.queues.Orders.URL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		if err != nil {
			f.t.Fatal(err)
		}
		busy := attrs.Attributes["ApproximateNumberOfMessages"] != "0" || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0"
		iter := f.rc.Scan(ctx, 0, f.prefix+":{*}:lock", 1000).Iterator()
		for iter.Next(ctx) {
			busy = true
		}
		for _, suffix := range []string{"wait", "proc"} {
			iter := f.rc.Scan(ctx, 0, f.prefix+":{*}:"+suffix, 1000).Iterator()
			for iter.Next(ctx) {
				if n, _ := f.rc.LLen(ctx, iter.Val()).Result(); n > 0 {
					busy = true
				}
			}
		}
		before := 0
		for _, rs := range f.results {
			before += len(rs)
		}
		f.collect(nil, time.Minute, nil)
		after := 0
		for _, rs := range f.results {
			after += len(rs)
		}
		if busy || after != before {
			quiet = 0
		} else {
			quiet++
		}
	}
}

// unversioned drops the moves' SKU versions: they count every operation on the SKU, so
// they depend on how the run interleaved the orders, which the model does not replay.
func unversioned(ms []stock.Move) []stock.Move {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Version = 0
	}
	return out
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestWorkerProcessesMatchTheReferenceModel(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d workers", n), func(t *testing.T) {
			f := newFleet(t)
			w := loadgen.Generate(ampleSpec("M"+testenv.ID(), 50))
			f.seed(w)
			f.start(n)
			f.sendWorkload(w)
			f.collect(distinctIDs(w.Events), 3*time.Minute, nil)
			f.verify(w)
		})
	}
}

// Reservations that expire in a run of two workers: orders held for a second and never
// paid expire (the workers' scanners submit their expiry), orders paid at once do not,
// orders paid after their expiry have the payment refused ERR_RESERVATION_EXPIRED, and
// an extension sent right after its placement races the expiry. The run equals the model
// replaying every event, the workers' expiries included, where each reached its turn; the
// stock the expired orders held is sellable again.
func TestExpiringReservationsMatchTheReferenceModel(t *testing.T) {
	f := newFleet(t)
	f.env = append(f.env, "JUNBAN_RESERVATION_SCAN_INTERVAL=100ms")
	skus := []stock.SKU{{SKU: "H-SKU", Lots: []stock.Lot{{LotID: "L1", Kind: stock.KindOnHand, Good: true,
		BestBefore: "2027-01-01", RegSeq: 1, ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 1000}}}}
	w := loadgen.Workload{Inventory: skus}
	f.seed(w)
	f.start(2)
	now := time.Now().UTC().Truncate(time.Microsecond)
	mk := func(lcid string, typ event.Type, data any) event.Order {
		e := event.Order{EventID: fmt.Sprintf("%s-%s", lcid, typ), Type: typ, LCID: lcid, OccurredAt: now}
		if data != nil {
			e.Data, _ = json.Marshal(data)
		}
		return e
	}
	place := func(lcid, holdFor string) event.Order {
		return mk(lcid, event.OrderPlaced, event.OrderData{Mode: stock.ModeReserve, TargetDate: "2026-12-01",
			Lines: []event.Line{{LineID: "1", SKU: "H-SKU", Qty: 3}}, Hold: event.Hold{HoldFor: holdFor}})
	}
	var first, late []event.Order
	expiries := map[string]bool{}
	for i := range 8 {
		lcid := fmt.Sprintf("H-%d", i)
		w.Orders = append(w.Orders, lcid)
		switch i % 4 {
		case 0: // abandoned: expires
			first = append(first, place(lcid, "1s"))
			expiries[event.ExpiryEventID(lcid, now.Add(time.Second))] = true
		case 1: // paid at once, with an hour to spare: never expires
			first = append(first, place(lcid, "1h"), mk(lcid, event.PaymentConfirmed, nil))
		case 2: // paid after it expired
			first = append(first, place(lcid, "1s"))
			expiries[event.ExpiryEventID(lcid, now.Add(time.Second))] = true
			late = append(late, mk(lcid, event.PaymentConfirmed, nil))
		case 3: // extended right away: the extension and the expiry race
			first = append(first, place(lcid, "1s"), mk(lcid, event.OrderReservationExtended, event.ReservationExtendedData{Hold: event.Hold{HoldFor: "1h"}}))
		}
	}
	w.Events = append(first, late...)
	f.send(first)
	f.collect(distinctIDs(first), time.Minute, nil)
	f.collect(expiries, time.Minute, nil)
	f.send(late)
	f.collect(distinctIDs(late), time.Minute, nil)
	f.verify(w)
	for _, e := range late {
		if r := f.results[e.EventID][0]; r.Outcome != event.Rejected || r.Reason != domain.ReasonReservationExpired {
			t.Errorf("%s: a payment after the expiry %s %s, want rejected %s", e.EventID, r.Outcome, r.Reason, domain.ReasonReservationExpired)
		}
	}
	for id := range expiries {
		if r := f.results[id][0]; r.Outcome != event.Applied || r.Order.Status != event.StatusExpired {
			t.Errorf("%s: %s %s, want applied and the order expired", id, r.Outcome, r.Reason)
		}
	}
	for _, lcid := range []string{"H-1", "H-5"} {
		st, err := order.LoadState(context.Background(), f.rc, f.prefix, lcid)
		if err != nil || st.Order == nil || !st.Order.Paid || st.Order.HoldUntil != nil || st.Order.Status != event.StatusPlaced {
			t.Errorf("%s paid at once: %+v (%v)", lcid, st.Order, err)
		}
	}
}

func TestKilledWorkerLosesNothingAndAppliesNothingTwice(t *testing.T) {
	f := newFleet(t)
	w := loadgen.Generate(ampleSpec("K"+testenv.ID(), 50))
	f.seed(w)
	f.start(2)
	f.sendWorkload(w)
	ids := distinctIDs(w.Events)
	killed := false
	f.collect(ids, 3*time.Minute, func(have int) {
		if !killed && have > len(ids)/4 {
			killed = true
			f.procs[0].Kill() // SIGKILL mid-turn: no handoff, no release
			f.start(1)        // and a replacement
		}
	})
	if !killed {
		t.Fatal("the load finished before the kill")
	}
	f.verify(w)
}

func TestGracefulShutdownUnderLoadLosesNothing(t *testing.T) {
	f := newFleet(t)
	w := loadgen.Generate(ampleSpec("G"+testenv.ID(), 30))
	f.seed(w)
	f.start(1)
	f.sendWorkload(w)
	ids := distinctIDs(w.Events)
	stopped := false
	f.collect(ids, 3*time.Minute, func(have int) {
		if !stopped && have > len(ids)/4 {
			stopped = true
			// Budget 5 s (JUNBAN_SHUTDOWN_BUDGET) plus the turns' leave and process exit.
			err, inTime := f.procs[0].Stop(10 * time.Second)
			if !inTime {
				t.Errorf("order-worker did not stop within its budget")
			} else if err != nil {
				t.Errorf("order-worker exited with %v after SIGTERM", err)
			}
			f.start(1)
		}
	})
	f.verify(w)
}

func TestPoisonMessagesGoToTheDLQAndTheWorkerGoesOn(t *testing.T) {
	f := newFleet(t)
	f.seed(loadgen.Workload{Inventory: []stock.SKU{{SKU: "P-SKU", Lots: []stock.Lot{{
		LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10}}}}})
	f.start(1)
	poison := map[string]string{
		`{"event_id":`: domain.ReasonMalformedJSON,
		`{"event_id":"p2","type":"order.teleported","lcid":"P"}`: domain.ReasonUnknownType,
		`{"type":"payment.confirmed","lcid":"P"}`:                domain.ReasonMissingField,
		`{"event_id":"p4","type":"order.placed","lcid":"P","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"P-SKU","qty":0}]}}`:                                       domain.ReasonInvalidQuantity,
		`{"event_id":"p5","type":"order.placed","lcid":"P","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"P-SKU","qty":-2}]}}`:                                      domain.ReasonInvalidQuantity,
		`{"event_id":"p6","type":"order.placed","lcid":"P","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"P-SKU","qty":1},{"line_id":"1","sku":"P-SKU","qty":1}]}}`: domain.ReasonDuplicateLine,
	}
	ctx := context.Background()
	for body := range poison {
		if _, err := f.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.queues.Orders.URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	good := event.Order{EventID: "good-1", Type: event.OrderPlaced, LCID: "P-OK", OccurredAt: time.Now(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"P-SKU","qty":2}]}`)}
	unknownSKU := event.Order{EventID: "good-2", Type: event.OrderPlaced, LCID: "P-UNK", OccurredAt: time.Now(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"NO-SUCH-SKU","qty":2}]}`)}
	f.send([]event.Order{good, unknownSKU})

	reasons := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for len(reasons) < len(poison) && time.Now().Before(deadline) {
		out, err := f.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(f.queues.Orders.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			attr := m.MessageAttributes["junban-dlq-reason"]
			reasons[aws.ToString(m.Body)] = aws.ToString(attr.StringValue)
			f.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(f.queues.Orders.DLQURL), ReceiptHandle: m.ReceiptHandle})
		}
	}
	for body, reason := range poison {
		got, ok := reasons[body]
		if !ok {
			t.Errorf("not in the DLQ: %s", body)
			continue
		}
		if !strings.Contains(got, reason) {
			t.Errorf("DLQ reason %q for %s, want %s", got, body, reason)
		}
	}
	f.collect(map[string]bool{"good-1": true, "good-2": true}, time.Minute, nil)
	if r := f.results["good-1"][0]; r.Outcome != event.Applied {
		t.Errorf("valid event after poison: %+v", r)
	}
	if r := f.results["good-2"][0]; r.Outcome != event.Rejected || r.Reason != "ERR_UNKNOWN_SKU" {
		t.Errorf("unknown SKU: %s/%s, want rejected/ERR_UNKNOWN_SKU", r.Outcome, r.Reason)
	}
}

func openDB(url string) (*gorm.DB, error) { return config.Postgres{URL: url}.Open() }
