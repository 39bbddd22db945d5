package api

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// startFleet runs two order-workers and a persist-worker on the env's prefix, schema and
// queues.
func (e *env) startFleet() *queue.Publisher {
	t := e.t
	envv := append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+e.prefix, "DATABASE_URL="+e.pgURL,
		"JUNBAN_ORDERS_QUEUE="+e.q.Orders.URL, "JUNBAN_ORDERS_DLQ="+e.q.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+e.q.Results.URL, "JUNBAN_RESULTS_DLQ="+e.q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOCK_TTL=2s", "JUNBAN_SWEEP_INTERVAL=500ms",
		"JUNBAN_LOG_LEVEL=warn", "JUNBAN_SHUTDOWN_BUDGET=5s",
	)
	for i := range 2 {
		testenv.Start(t, fmt.Sprintf("order-worker-%d", i), testenv.Binary(t, "order-worker"), envv)
	}
	testenv.Start(t, "persist-worker", testenv.Binary(t, "persist-worker"), envv)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: e.sqs, QueueURL: e.q.Orders.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	return pub
}

// checkTimeline: every event at most once, in seq order.
func checkTimeline(v OrderView) error {
	seen := map[string]bool{}
	for i, ev := range v.Timeline {
		if seen[ev.EventID] {
			return fmt.Errorf("%s: event %s twice in the timeline", v.LCID, ev.EventID)
		}
		seen[ev.EventID] = true
		if i > 0 && ev.Seq <= v.Timeline[i-1].Seq {
			return fmt.Errorf("%s: timeline seq %d after %d", v.LCID, ev.Seq, v.Timeline[i-1].Seq)
		}
	}
	return nil
}

// The order endpoint during and after a load with duplicates and payments before their
// placement: during it every answer is valid and its timeline has no event twice and
// is in seq order; after it, each order's timeline has every distinct event of the
// order exactly once, in seq order, its state equals the state in Redis, and the
// persisted order in the list equals it too.
func TestOrderDuringAndAfterALoad(t *testing.T) {
	e := newEnv(t)
	pub := e.startFleet()
	spec := loadgen.DefaultSpec("O" + testenv.ID())
	spec.Orders, spec.SKUs, spec.StockPerLot = 120, 5, 1000
	spec.DuplicateShare, spec.OutOfOrderShare, spec.ShuffleShare = 0.3, 0.3, 0.2
	w := loadgen.Generate(spec)
	if len(w.EarlyPayments) == 0 {
		t.Fatal("the workload has no early payments")
	}
	events := map[string]map[string]bool{} // lcid -> distinct event ids
	for _, ev := range w.Events {
		if events[ev.LCID] == nil {
			events[ev.LCID] = map[string]bool{}
		}
		events[ev.LCID][ev.EventID] = true
	}

	// Readers poll orders while the load runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var readErrs []error
	polled := 0
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				lcid := w.Orders[rng.IntN(len(w.Orders))]
				code, body := e.do("GET", "/v1/orders/"+lcid, readToken, nil)
				if code == 404 {
					continue // nothing arrived for it yet
				}
				var v OrderView
				decode(t, body, &v)
				mu.Lock()
				polled++
				if err := checkTimeline(v); err != nil || code != 200 {
					readErrs = append(readErrs, fmt.Errorf("%d: %v", code, err))
				}
				mu.Unlock()
			}
		}()
	}
	s, err := loadgen.Run(context.Background(), e.db, pub, loadgen.RunConfig{Spec: spec, Wait: 3 * time.Minute})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if s.Missing != 0 || s.Persisted != s.Distinct {
		t.Fatalf("load: %d missing, %d persisted of %d distinct", s.Missing, s.Persisted, s.Distinct)
	}
	if len(readErrs) > 0 || polled == 0 {
		t.Fatalf("%d reads during the load, %d errors, the first: %v", polled, len(readErrs), readErrs[:min(len(readErrs), 3)])
	}
	e.settle()

	store := order.NewStore(e.rc, e.prefix)
	persisted := map[string]OrderRow{}
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/v1/orders?limit=50"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		code, body := e.do("GET", path, readToken, nil)
		var l OrderList
		decode(t, body, &l)
		if code != 200 {
			t.Fatalf("list: %d %s", code, body)
		}
		for _, o := range l.Orders {
			if _, dup := persisted[o.LCID]; dup {
				t.Fatalf("%s on two pages", o.LCID)
			}
			persisted[o.LCID] = o
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	if len(persisted) != len(w.Orders) {
		t.Fatalf("the list holds %d orders, want %d", len(persisted), len(w.Orders))
	}
	for _, lcid := range w.Orders {
		code, body := e.do("GET", "/v1/orders/"+lcid, readToken, nil)
		var v OrderView
		decode(t, body, &v)
		if code != 200 {
			t.Fatalf("%s: %d %s", lcid, code, body)
		}
		if err := checkTimeline(v); err != nil {
			t.Fatal(err)
		}
		if len(v.Timeline) != len(events[lcid]) {
			t.Fatalf("%s: %d events in the timeline, want the %d distinct ones: %s", lcid, len(v.Timeline), len(events[lcid]), body)
		}
		for _, ev := range v.Timeline {
			if !events[lcid][ev.EventID] {
				t.Fatalf("%s: timeline has %s, not one of its events", lcid, ev.EventID)
			}
			if ev.CommittedAt.Before(ev.ProcessedAt.Add(-time.Second)) || ev.Outcome == "" {
				t.Fatalf("%s: timeline event %+v", lcid, ev)
			}
		}
		want, seq, err := store.Order(ctx, lcid)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.State, want) || v.StateSeq != seq {
			t.Fatalf("%s: state %+v (seq %d), Redis holds %+v (seq %d)", lcid, v.State, v.StateSeq, want, seq)
		}
		if last := v.Timeline[len(v.Timeline)-1]; last.Seq != seq {
			t.Fatalf("%s: the timeline ends at seq %d, the state is at %d", lcid, last.Seq, seq)
		}
		row := persisted[lcid]
		if want != nil && (row.Status != want.Status || row.Paid != want.Paid || row.Seq != seq || !reflect.DeepEqual(row.Lines, orEmpty(want.Lines))) {
			t.Fatalf("%s: persisted %+v, Redis %+v", lcid, row, want)
		}
		if v.Turn.Holder != "" || v.Turn.Proc != nil || v.Turn.WaitDepth != 0 {
			t.Fatalf("%s: turn after the load %+v", lcid, v.Turn)
		}
	}
	// Filters.
	code, body := e.do("GET", "/v1/orders?status=shipped&sku="+w.Inventory[0].SKU, readToken, nil)
	var l OrderList
	decode(t, body, &l)
	if code != 200 {
		t.Fatalf("filtered list: %d %s", code, body)
	}
	for _, o := range l.Orders {
		has := false
		for _, ln := range o.Lines {
			has = has || ln.SKU == w.Inventory[0].SKU
		}
		if o.Status != "shipped" || !has {
			t.Fatalf("filtered list holds %+v", o)
		}
	}
	for path, want := range map[string]int{
		"/v1/orders?status=lost":   400,
		"/v1/orders?limit=1001":    400,
		"/v1/orders?cursor=@@":     400,
		"/v1/orders/LC-NOPE":       404,
		"/v1/orders/LC%7Bx%7D":     400,
		"/v1/orders/LC-1?limit=-1": 400,
	} {
		if code, body := e.do("GET", path, readToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
}

func orEmpty(l []event.SnapshotLine) []event.SnapshotLine {
	if l == nil {
		return []event.SnapshotLine{}
	}
	return l
}

// settle waits until no entity of the prefix holds a turn, a backlog or an outbox.
func (e *env) settle() {
	t := e.t
	deadline := time.Now().Add(2 * time.Minute)
	// Deliberate pauses: the fleet is settled once three looks 300 ms apart find it quiet.
	for quiet := 0; quiet < 3; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not settle")
		}
		busy := false
		for _, pattern := range []string{":{*}:lock", ":{*}:wait", ":{*}:proc", ":{*}:outbox"} {
			iter := e.rc.Scan(ctx, 0, e.prefix+pattern, 1000).Iterator()
			for iter.Next(ctx) {
				if !strings.HasSuffix(iter.Val(), ":lock") {
					if n, _ := e.rc.LLen(ctx, iter.Val()).Result(); n == 0 {
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
