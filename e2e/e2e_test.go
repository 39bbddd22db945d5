// Package e2e runs the whole fleet as processes (two order-workers and a persist-worker)
// against real Redis, PostgreSQL and the SQS emulator, and checks what PostgreSQL ends with.
// Where the emulator serves SNS too (fauxqs), a fifth of the load is published to a topic
// the orders queue is subscribed to, and reaches the workers as SNS notifications.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

type fleet struct {
	rc     redis.UniversalClient
	prefix string
	db     *gorm.DB
	// pub sends to the orders queue: viaSNS of the events through an SNS topic when the
	// stack has SNS, the rest straight to the queue.
	pub    loadgen.Publisher
	sqs    *sqs.Client
	queues testenv.Queues
}

// viaSNS is the share of the load published through an SNS topic where there is one.
const viaSNS = 0.2

// startFleet starts the fleet on queues of its own, made by newQueues (standard or FIFO).
func startFleet(t *testing.T, newQueues testenv.NewQueuesFunc) *fleet {
	t.Helper()
	f := &fleet{}
	f.rc, f.prefix = testenv.Redis(t)
	pgURL := testenv.PostgresURL(t)
	var err error
	if f.db, err = (config.Postgres{URL: pgURL}).Open(); err != nil {
		t.Fatal(err)
	}
	c := testenv.SQS(t)
	q := newQueues(t, c, 20)
	f.sqs, f.queues = c, q
	env := append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+f.prefix,
		"DATABASE_URL="+pgURL,
		"JUNBAN_ORDERS_QUEUE="+q.Orders.URL, "JUNBAN_ORDERS_DLQ="+q.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+q.Results.URL, "JUNBAN_RESULTS_DLQ="+q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOCK_TTL=2s", "JUNBAN_SWEEP_INTERVAL=500ms",
		"JUNBAN_LOG_LEVEL=warn", "JUNBAN_SHUTDOWN_BUDGET=5s",
	)
	for i := range 2 {
		testenv.Start(t, fmt.Sprintf("order-worker-%d", i), testenv.Binary(t, "order-worker"), env)
	}
	testenv.Start(t, "persist-worker", testenv.Binary(t, "persist-worker"), env)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.Orders.URL, Keys: domain.OrderKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	f.pub = pub
	switch {
	case strings.HasSuffix(q.Orders.URL, ".fifo"):
		t.Log("FIFO queues: every event goes straight to the orders queue (a standard topic cannot feed a FIFO queue)")
	case testenv.HasSNS(t):
		sn := testenv.SNS(t)
		topic := testenv.Topic(t, sn)
		if _, err := topics.Subscribe(context.Background(), sn, c, topics.Spec{TopicARN: topic, QueueURL: q.Orders.URL}); err != nil {
			t.Fatal(err)
		}
		f.pub = loadgen.Split{Queue: pub, Other: topics.Publisher{Client: sn, TopicARN: topic}, Share: viaSNS}
	default:
		t.Log("no SNS beside this SQS: every event goes straight to the orders queue")
	}
	return f
}

func (f *fleet) run(t *testing.T, spec loadgen.Spec) loadgen.Summary {
	t.Helper()
	s, err := loadgen.Run(context.Background(), f.db, f.pub, loadgen.RunConfig{Spec: spec, Wait: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if s.Missing != 0 {
		t.Fatalf("%d events have no result in PostgreSQL", s.Missing)
	}
	if s.Oversold != 0 || s.Unconserved != 0 {
		t.Errorf("oversold SKUs %d, unconserved lots %d", s.Oversold, s.Unconserved)
	}
	if s.Persisted != s.Distinct {
		t.Errorf("%d results persisted for %d distinct events", s.Persisted, s.Distinct)
	}
	f.settle(t)
	return s
}

// settle waits until no entity holds a turn or a backlog and every result in Redis is in
// PostgreSQL's inbox: late duplicates have been handled too.
func (f *fleet) settle(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	// Deliberate pauses: the fleet is settled once three looks 300 ms apart find it quiet.
	for quiet := 0; quiet < 3; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not settle")
		}
		busy := false
		for _, pattern := range []string{":{*}:lock", ":{*}:wait", ":{*}:proc", ":{*}:outbox"} {
			iter := f.rc.Scan(ctx, 0, f.prefix+pattern, 1000).Iterator()
			for iter.Next(ctx) {
				if !strings.HasSuffix(iter.Val(), ":lock") {
					if n, _ := f.rc.LLen(ctx, iter.Val()).Result(); n == 0 {
						continue
					}
				}
				busy = true
			}
		}
		if busy {
			quiet = 0
		} else {
			quiet++
		}
	}
}

// doneResults reads every event's result from its done marker in Redis, which carries
// the order the event reached its entity's turn in: the orders' ("{<lcid>}") and the
// SKUs' ("{sku:<sku>}", the warehouse's events).
func (f *fleet) doneResults(t *testing.T, run string) []event.Result {
	t.Helper()
	ctx := context.Background()
	var out []event.Result
	for _, entity := range []string{run, domain.SKUEntity(run)} {
		iter := f.rc.Scan(ctx, 0, f.prefix+":{"+entity+"*}:done:*", 1000).Iterator()
		for iter.Next(ctx) {
			raw, err := f.rc.Get(ctx, iter.Val()).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			var r event.Result
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
	}
	return out
}

// skusFirst puts the SKUs' entities (the warehouse's events) before the orders', each
// entity's events in the order they reached its turn. The comparison with the model is
// exact because the workload's feed commutes with its orders (ample stock and
// loadgen.Spec.FeedCommutes: no feed event changes which lot an order takes or whether it
// gets it), but for the registration of a new SKU, which loadgen.Run sends and waits for
// before any order names the SKU (its gates); the replay puts it first too.
func skusFirst(events []domain.Event) []domain.Event {
	out := make([]domain.Event, 0, len(events))
	for _, first := range []bool{true, false} {
		for _, e := range events {
			if strings.HasPrefix(e.Entity(), domain.SKUEntity("")) == first {
				out = append(out, e)
			}
		}
	}
	return out
}

func TestEndToEnd(t *testing.T) {
	f := startFleet(t, testenv.NewQueues)

	t.Run("PostgreSQL equals the reference model", func(t *testing.T) {
		spec := loadgen.DefaultSpec("E" + testenv.ID())
		spec.Orders, spec.SKUs, spec.StockPerLot, spec.SafetyStock = 300, 10, 1_000_000, 0
		spec.ExtraChanges, spec.ShuffleShare, spec.DuplicateShare = 3, 0.3, 0.2
		spec.FeedCommutes = true
		s := f.run(t, spec)
		if s.Sent < 2000 {
			t.Fatalf("only %d events: not the few thousand this test is about", s.Sent)
		}
		f.equalsTheModel(t, spec, s)
	})

	t.Run("scarce stock is never oversold", func(t *testing.T) {
		spec := loadgen.DefaultSpec("S" + testenv.ID())
		spec.Orders, spec.SKUs, spec.StockPerLot, spec.SafetyStock, spec.SKUSkew = 400, 8, 25, 5, 1.5
		s := f.run(t, spec)
		if s.RejectedBy["ERR_SHORTAGE"]+s.RejectedBy["ERR_SAFETY_STOCK"] == 0 {
			t.Fatalf("no order ran short: the run did not test oversell protection (%+v)", s.RejectedBy)
		}
		f.ordersHoldWhatTheLotsSay(t, spec.Run)
		f.reconcile(t)
	})
}

// The fleet on FIFO queues (orders, results and their DLQs): every send carries its
// group and deduplication id (the orders' from the loadgen, the nudges', the results'),
// the duplicates the workload sends within five minutes are dropped by SQS, and
// PostgreSQL still equals the reference model. Fewer orders than TestEndToEnd: SQS
// delivers one group's messages one at a time.
func TestEndToEndFIFO(t *testing.T) {
	f := startFleet(t, testenv.NewFIFOQueues)
	spec := loadgen.DefaultSpec("F" + testenv.ID())
	spec.Orders, spec.SKUs, spec.StockPerLot, spec.SafetyStock = 150, 8, 1_000_000, 0
	spec.ExtraChanges, spec.ShuffleShare, spec.DuplicateShare = 3, 0.3, 0.2
	spec.FeedCommutes = true
	s := f.run(t, spec)
	if s.Sent < 1000 {
		t.Fatalf("only %d events", s.Sent)
	}
	t.Logf("%d events sent, %d distinct", s.Sent, s.Distinct)
	f.equalsTheModel(t, spec, s)
}

// equalsTheModel checks that what PostgreSQL holds of spec's run, orders and lots, is
// what the reference model makes of the events in the order they reached their turns, and
// reconciles.
func (f *fleet) equalsTheModel(t *testing.T, spec loadgen.Spec, s loadgen.Summary) {
	t.Helper()
	w := loadgen.Generate(spec)
	byID := map[string]event.Order{}
	for _, e := range w.Events {
		byID[e.EventID] = e
	}
	results := f.doneResults(t, spec.Run)
	if len(results) != s.Distinct {
		t.Fatalf("%d done markers for %d distinct events", len(results), s.Distinct)
	}
	events, err := domain.InArrivalOrder(results, byID)
	if err != nil {
		t.Fatal(err)
	}
	model := stock.NewModel(w.Loader())
	states, _, err := domain.Replay(context.Background(), model, domain.Policy{}, skusFirst(events), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var rows []persist.OrderRow
	if err := f.db.Where("lcid LIKE ?", spec.Run+"-%").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(w.Orders) {
		t.Fatalf("%d orders in PostgreSQL, want %d", len(rows), len(w.Orders))
	}
	for _, row := range rows {
		want := states[row.LCID]
		if want.Order == nil {
			t.Errorf("%s in PostgreSQL, not in the model", row.LCID)
			continue
		}
		var lines []event.SnapshotLine
		json.Unmarshal(row.Lines, &lines)
		got := event.OrderSnapshot{LCID: row.LCID, Status: row.Status, Paid: row.Paid, Lines: lines,
			Allocation: deref(row.Allocation), Mode: stock.Mode(deref(row.Mode)), TargetDate: want.Order.TargetDate}
		if a, b := jsonOf(got), jsonOf(want.Order); a != b || row.Seq != want.Seq {
			t.Errorf("%s\npostgres seq %d %s\nmodel    seq %d %s", row.LCID, row.Seq, a, want.Seq, b)
		}
	}
	if len(w.NewSKUs) == 0 {
		t.Error("the feed registered no SKU during the run")
	}
	for _, sku := range w.SKUs() {
		exp, err := model.Snapshot(context.Background(), sku)
		if err != nil {
			t.Fatal(err)
		}
		got, err := inventorydb.PGLoader{DB: f.db}.LoadSKU(context.Background(), sku)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := jsonOf(got.Lots), jsonOf(exp.Lots); a != b {
			t.Errorf("%s lots\npostgres %s\nmodel    %s", sku, a, b)
		}
	}
	f.reconcile(t)
}

// ordersHoldWhatTheLotsSay checks, in PostgreSQL, that for every lot the quantities the
// orders' lines hold (reserved, allocated or shipped, by the order's state) are exactly
// the lot's reserved, allocated and shipped buckets.
func (f *fleet) ordersHoldWhatTheLotsSay(t *testing.T, run string) {
	t.Helper()
	var rows []persist.OrderRow
	if err := f.db.Where("lcid LIKE ?", run+"-%").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	type key struct{ sku, lot, bucket string }
	held := map[key]int64{}
	for _, r := range rows {
		var bucket string
		switch {
		case r.Status == event.StatusShipped:
			bucket = stock.Shipped
		case r.Status == event.StatusPlaced && deref(r.Allocation) == "allocated":
			bucket = stock.Allocated
		case r.Status == event.StatusPlaced:
			bucket = stock.Reserved
		default:
			continue
		}
		var lines []event.SnapshotLine
		json.Unmarshal(r.Lines, &lines)
		for _, l := range lines {
			sum := int64(0)
			for _, lq := range l.Lots {
				held[key{l.SKU, lq.LotID, bucket}] += lq.Qty
				sum += lq.Qty
			}
			if sum != l.Qty {
				t.Errorf("%s line %s holds %d of %d", r.LCID, l.LineID, sum, l.Qty)
			}
			// What came back of a shipment (order.returned) left the shipped bucket.
			for _, lq := range l.Returned {
				held[key{l.SKU, lq.LotID, bucket}] -= lq.Qty
			}
		}
	}
	var lots []persist.LotRow
	if err := f.db.Where("sku LIKE ?", run+"-%").Find(&lots).Error; err != nil {
		t.Fatal(err)
	}
	for _, l := range lots {
		for bucket, v := range map[string]int64{stock.Reserved: l.Reserved, stock.Allocated: l.Allocated, stock.Shipped: l.Shipped} {
			if got := held[key{l.SKU, l.LotID, bucket}]; got != v {
				t.Errorf("%s/%s %s: orders hold %d, the lot says %d", l.SKU, l.LotID, bucket, got, v)
			}
		}
	}
}

func (f *fleet) reconcile(t *testing.T) {
	t.Helper()
	led, err := ledger.New(ledger.Config{Redis: f.rc, Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := persist.Reconcile(context.Background(), persist.ReconcileConfig{
		DB:     f.db,
		SKUs:   led,
		Orders: order.NewStore(f.rc, f.prefix),
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Remaining() != 0 {
		for _, d := range rep.Drifts {
			t.Errorf("drift: %s", d)
		}
	}
	if rep.SKUs == 0 || rep.Orders == 0 {
		t.Errorf("reconcile compared %d SKUs and %d orders", rep.SKUs, rep.Orders)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
