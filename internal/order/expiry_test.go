package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/expiry"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/orderdb"
	"github.com/junban/junban/internal/testenv"
)

// holding records what a scanner submits instead of running it, so a test decides when
// (and how many times) the turns get it.
type holding struct {
	mu   sync.Mutex
	sent [][]byte
	lcid []string
}

func (r *holding) Submit(_ context.Context, entity string, envelope []byte) (lockhandoff.Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, envelope)
	r.lcid = append(r.lcid, entity)
	return lockhandoff.OutcomeQueued, nil
}

func (r *holding) Resume(context.Context, string) error { return nil }

// forward submits every envelope recorded into the harness's turns.
func (r *holding) forward(t *testing.T, h *harness) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, env := range r.sent {
		if _, err := h.turns.Submit(context.Background(), r.lcid[i], env); err != nil {
			t.Fatal(err)
		}
	}
}

func newScanner(t *testing.T, h *harness, turns expiry.Turns, lease time.Duration, now func() time.Time) *expiry.Scanner {
	t.Helper()
	s, err := expiry.NewScanner(expiry.ScannerConfig{Redis: h.rc, Turns: turns, Prefix: h.prefix, Lease: lease, Now: now,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// heldOrder is a reserve-mode order of one unit of A that held until an hour ago.
func heldOrder(lcid string, until time.Time) event.Order {
	e := ev(lcid, event.OrderPlaced, event.OrderData{Mode: stock.ModeReserve, TargetDate: "2026-12-01",
		Lines: []event.Line{line("1", "A", 1)}, Hold: event.Hold{HoldUntil: &until}})
	e.OccurredAt = until.Add(-time.Hour)
	return e
}

// dueEntries is the due index: lcid -> score, over every shard.
func dueEntries(t *testing.T, rc redis.UniversalClient, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for shard := range order.DueShards {
		zs, err := rc.ZRangeWithScores(context.Background(), order.DueKey(prefix, shard), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			lcid := z.Member.(string)
			if order.DueShard(lcid) != shard {
				t.Errorf("%s in shard %d, want %d", lcid, shard, order.DueShard(lcid))
			}
			out[lcid] = int64(z.Score)
		}
	}
	return out
}

func orderOf(t *testing.T, h *harness, lcid string) *event.OrderSnapshot {
	t.Helper()
	st, err := h.proc.Load(context.Background(), lcid)
	if err != nil {
		t.Fatal(err)
	}
	return st.Order
}

func lotA(t *testing.T, h *harness) stock.Lot {
	t.Helper()
	s, err := h.led.Snapshot(context.Background(), "A")
	if err != nil {
		t.Fatal(err)
	}
	return s.Lots[0]
}

// Two scanners that scan at the same time submit each due hold's expiry once between
// them (the claim), and when claims lapse and both submit it, or a scanner submits it
// again, the order expires once: one result, its units released once (the expiry's event
// id is the hold's, and the turn dedups it). Seen failing against two broken variants:
// due.lua without its ZADD XX (the claim): 2N submissions for N holds; and ExpiryEvent
// with a random event id: a second result for each hold (rejected ERR_HOLD_NOT_DUE).
func TestExpiryOnceWithTwoScannersRacing(t *testing.T) {
	t.Parallel()
	const n = 6
	h := newHarness(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 2*n, "2027-01-01")}}})
	now := time.Now()
	clock := func() time.Time { return now }
	place := func(tag string) []string {
		var lcids []string
		for i := range n {
			lcid := fmt.Sprintf("EXP-%s-%d", tag, i)
			h.submit(heldOrder(lcid, now.Add(-time.Minute)))
			lcids = append(lcids, lcid)
		}
		return lcids
	}
	check := func(t *testing.T, lcids []string, rec *holding) {
		t.Helper()
		rec.forward(t, h)
		rec.forward(t, h) // a replica whose claim lapsed submits it again
		for _, lcid := range lcids {
			o := orderOf(t, h, lcid)
			if o.Status != event.StatusExpired || o.HoldUntil != nil {
				t.Errorf("%s: %s hold %v, want expired without a hold", lcid, o.Status, o.HoldUntil)
			}
		}
		h.drain()
		for _, lcid := range lcids {
			var got []string
			for _, rs := range h.results {
				if r := rs[0]; r.LCID == lcid && r.Type == event.OrderReservationExpired {
					got = append(got, r.Outcome+" "+r.Reason)
				}
			}
			if len(got) != 1 || got[0] != event.Applied+" " {
				t.Errorf("%s: the results of its expiry: %q, want one applied", lcid, got)
			}
		}
	}

	t.Run("the claim keeps them apart", func(t *testing.T) {
		lcids := place("claim")
		if got := len(dueEntries(t, h.rc, h.prefix)); got != n {
			t.Fatalf("%d due entries, want %d", got, n)
		}
		rec := &holding{}
		a, b := newScanner(t, h, rec, time.Minute, clock), newScanner(t, h, rec, time.Minute, clock)
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, s := range []*expiry.Scanner{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := s.Scan(context.Background())
				if err != nil {
					t.Error(err)
				}
				counts[i] = c
			}()
		}
		wg.Wait()
		if counts[0]+counts[1] != n || len(rec.sent) != n {
			t.Errorf("submitted %v (%d), want %d in all", counts, len(rec.sent), n)
		}
		check(t, lcids, rec)
		// Once the claims are over, a scan drops the entries of the expired orders.
		later := func() time.Time { return now.Add(2 * time.Minute) }
		if c, err := newScanner(t, h, rec, time.Minute, later).Scan(context.Background()); err != nil || c != 0 {
			t.Errorf("scan after the expiries: %d submitted, %v", c, err)
		}
		if left := dueEntries(t, h.rc, h.prefix); len(left) != 0 {
			t.Errorf("due entries left: %v", left)
		}
	})

	t.Run("lapsed claims: the event id dedups", func(t *testing.T) {
		lcids := place("lapse")
		rec := &holding{}
		// A claim of a microsecond lapses before the other scanner looks.
		a := newScanner(t, h, rec, time.Microsecond, clock)
		b := newScanner(t, h, rec, time.Microsecond, func() time.Time { return now.Add(time.Millisecond) })
		for _, s := range []*expiry.Scanner{a, b} {
			if _, err := s.Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if len(rec.sent) != 2*n {
			t.Fatalf("%d submitted, want %d: both scanners", len(rec.sent), 2*n)
		}
		check(t, lcids, rec)
		if l := lotA(t, h); l.Reserved != 0 || l.Sellable != 2*n {
			t.Errorf("lot A1: %d sellable %d reserved, want %d and 0", l.Sellable, l.Reserved, 2*n)
		}
	})
}

// A hold extended before it is due is not expired: the scanner finds its entry at the new
// time; an expiry found due before an extension and run after it is refused
// (ERR_HOLD_NOT_DUE) and the reservation stays, its entry at the new hold. A payment
// removes the entry after its commit.
func TestExtendedHoldIsNotExpired(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 5, "2027-01-01")}}})
	now := time.Now().UTC().Truncate(time.Microsecond)
	clock := func() time.Time { return now }
	was, next := now.Add(-time.Minute), now.Add(time.Hour)
	extendTo := func(lcid string) {
		e := ev(lcid, event.OrderReservationExtended, event.ReservationExtendedData{Hold: event.Hold{HoldUntil: &next}})
		e.OccurredAt = was.Add(-time.Minute)
		h.submit(e)
	}

	h.submit(heldOrder("EXT-1", was))
	extendTo("EXT-1")
	rec := &holding{}
	if c, err := newScanner(t, h, rec, time.Minute, clock).Scan(context.Background()); err != nil || c != 0 {
		t.Fatalf("scan: %d submitted, %v; want none", c, err)
	}
	if got := dueEntries(t, h.rc, h.prefix)["EXT-1"]; got != next.UnixMicro() {
		t.Errorf("EXT-1's entry at %d, want %d", got, next.UnixMicro())
	}

	h.submit(heldOrder("EXT-2", was))
	if c, err := newScanner(t, h, rec, time.Minute, clock).Scan(context.Background()); err != nil || c != 1 {
		t.Fatalf("scan: %d submitted, %v; want 1", c, err)
	}
	extendTo("EXT-2")
	rec.forward(t, h)
	if o := orderOf(t, h, "EXT-2"); o.Status != event.StatusPlaced || o.HoldUntil == nil || !o.HoldUntil.Equal(next) {
		t.Errorf("EXT-2 after its stale expiry: %+v", o)
	}
	h.collect(4)
	if r := h.result(event.ExpiryEventID("EXT-2", was)); r.Reason != domain.ReasonHoldNotDue {
		t.Errorf("the stale expiry: %s %s, want rejected %s", r.Outcome, r.Reason, domain.ReasonHoldNotDue)
	}
	if got := dueEntries(t, h.rc, h.prefix)["EXT-2"]; got != next.UnixMicro() {
		t.Errorf("EXT-2's entry at %d, want %d", got, next.UnixMicro())
	}
	if l := lotA(t, h); l.Reserved != 2 {
		t.Errorf("%d reserved, want 2", l.Reserved)
	}

	h.submit(ev("EXT-1", event.PaymentConfirmed, nil))
	if _, ok := dueEntries(t, h.rc, h.prefix)["EXT-1"]; ok {
		t.Error("a paid order's entry stays")
	}
}

var errCrash = errors.New("test: the worker dies here")

// A worker that dies right before or right after the commit of a placement with a hold
// loses nothing: the entry was written before the commit, and the re-run that commits
// (after a death before it) writes it again; a scan between finds the uncommitted entry
// harmless. The hold then expires once. Seen failing against the handler that wrote the
// entry after the commit: a death after the commit left a committed hold without an entry
// (its re-run finds the event done and writes nothing), and the scan found nothing due.
func TestCrashBetweenIndexAndCommitLosesNothing(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"commit", "committed"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			var once sync.Once
			h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 5, "2027-01-01")}}}, harnessOptions{})
			order.SetCrash(h.proc, func(at string) error {
				var err error
				if at == point {
					once.Do(func() { err = errCrash })
				}
				return err
			})
			now := time.Now()
			lcid := "CRASH-" + point
			body := heldOrder(lcid, now.Add(-time.Minute))
			h.submit(body)
			rec := &holding{}
			// A scan while the placement waits for its re-run.
			if _, err := newScanner(t, h, rec, time.Millisecond, func() time.Time { return now }).Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 30*time.Second, "the placement committed", func() bool {
				o := orderOf(t, h, lcid)
				return o != nil && o.HoldUntil != nil
			})
			testenv.WaitFor(t, 30*time.Second, "the hold expired", func() bool {
				s := newScanner(t, h, h.turns, time.Millisecond, time.Now)
				if _, err := s.Scan(context.Background()); err != nil {
					t.Fatal(err)
				}
				return orderOf(t, h, lcid).Status == event.StatusExpired
			})
			if l := lotA(t, h); l.Reserved != 0 || l.Sellable != 5 {
				t.Errorf("lot A1: %d sellable %d reserved", l.Sellable, l.Reserved)
			}
		})
	}
}

// An order restored from PostgreSQL keeps its hold (orders.hold_until), and the step that
// restores it writes its due entry (Redis lost the index with the state). Runs once the
// orders table has the column (migration 00007).
func TestRestoredOrderKeepsItsHold(t *testing.T) {
	t.Parallel()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	var cols int64
	if err := db.Raw(`SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
		AND table_name = 'orders' AND column_name = 'hold_until'`).Scan(&cols).Error; err != nil {
		t.Fatal(err)
	}
	if cols == 0 {
		t.Skip("orders.hold_until arrives with migration 00007")
	}
	seed(t, db, []stock.SKU{{SKU: "R", Lots: []stock.Lot{onHand("R1", 1, 10, "2027-01-01")}}})
	hold := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	lines := `[{"line_id":"1","sku":"R","qty":2,"lots":[{"lot_id":"R1","qty":2}]}]`
	if err := db.Exec(`INSERT INTO orders (lcid, status, allocation, paid, mode, target_date, lines, seq, last_event_id, hold_until)
		VALUES ('LOST-H', 'placed', 'reserved', false, 'reserve', '2026-12-01', ?::jsonb, 3, 'x', ?)`, lines, hold).Error; err != nil {
		t.Fatal(err)
	}
	o, _, found, err := orderdb.PGLoader{DB: db}.LoadOrder(context.Background(), "LOST-H")
	if err != nil || !found || o.HoldUntil == nil || !o.HoldUntil.Equal(hold) {
		t.Fatalf("loaded %+v (found %v, %v), want hold_until %v", o, found, err, hold)
	}
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := order.New(order.Config{Redis: rc, Ledger: led, Publisher: &discard{}, Prefix: prefix, Loader: orderdb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	turns, err := lockhandoff.New(lockhandoff.Config{Redis: rc, Prefix: prefix, Handler: proc, NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(ev("LOST-H", event.OrderLinesChanged, event.OrderData{Lines: []event.Line{line("1", "R", 3)}}))
	if _, err := turns.Submit(context.Background(), "LOST-H", body); err != nil {
		t.Fatal(err)
	}
	st, err := order.LoadState(context.Background(), rc, prefix, "LOST-H")
	if err != nil || st.Order == nil || st.Order.HoldUntil == nil || !st.Order.HoldUntil.Equal(hold) {
		t.Fatalf("restored order %+v (%v), want hold_until %v", st.Order, err, hold)
	}
	if got := dueEntries(t, rc, prefix)["LOST-H"]; got != hold.UnixMicro() {
		t.Errorf("due entry %d, want %d", got, hold.UnixMicro())
	}
}

// metricValue reads a metric's value (the sum over its series) from reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// The scanner's gauges say how many holds are due and unclaimed and how late the oldest
// is, at its last scan; the processor counts the steps that expired an order.
func TestReservationMetrics(t *testing.T) {
	t.Parallel()
	procReg := prometheus.NewRegistry()
	h := newHarnessWith(t, []stock.SKU{{SKU: "A", Lots: []stock.Lot{onHand("A1", 1, 5, "2027-01-01")}}}, harnessOptions{
		processor: func(c *order.Config) { c.Registerer = procReg },
	})
	now := time.Now().UTC().Truncate(time.Second)
	h.submit(heldOrder("MET-1", now.Add(-time.Minute)))
	h.submit(heldOrder("MET-2", now.Add(-2*time.Minute)))
	h.submit(heldOrder("MET-3", now.Add(time.Hour)))
	rec := &holding{}
	reg := prometheus.NewRegistry()
	s, err := expiry.NewScanner(expiry.ScannerConfig{Redis: h.rc, Turns: rec, Prefix: h.prefix, Registerer: reg,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if due, age := metricValue(t, reg, "junban_reservations_due"), metricValue(t, reg, "junban_reservations_due_oldest_age_seconds"); due != 2 || age != 120 {
		t.Errorf("due %v, oldest age %v s; want 2 and 120", due, age)
	}
	rec.forward(t, h)
	if n := metricValue(t, procReg, "junban_reservations_expired_total"); n != 2 {
		t.Errorf("expired_total %v, want 2", n)
	}
	if _, err := s.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	if due, age := metricValue(t, reg, "junban_reservations_due"), metricValue(t, reg, "junban_reservations_due_oldest_age_seconds"); due != 0 || age != 0 {
		t.Errorf("after the claims: due %v, oldest age %v s; want 0 and 0", due, age)
	}
}
