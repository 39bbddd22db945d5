package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// How the checks find an event applied twice.
//
// The obvious witness, a ledger move recorded twice, cannot appear: moves are keyed by
// (op_id, index) in PostgreSQL and op ids are derived from the event, so a second
// application under the same op id is refused by the ledger (it returns the first
// result) and, were it not, by the primary key. An event applied twice shows up
// instead as a disagreement between things that must agree when every event took
// effect exactly once:
//
//   - Turns. Every result takes the entity's next seq, so an entity whose events were
//     each applied once has inbox rows with seqs exactly 1..n, where n is the seq of
//     its state in Redis. An event processed a second time (its done marker gone, a
//     zombie holder committing after the sweeper) takes another seq that no inbox row
//     carries, since the inbox keeps the first result per event id: a gap.
//   - Holdings. What the orders hold, line by line and lot by lot, is exactly what the
//     lots hold: per lot, reserved = the lots of placed orders in reserve mode,
//     allocated = those of placed, allocated orders, shipped = those of shipped orders
//     (cancelled and rejected orders hold nothing). An allocation or release run twice
//     under different op ids (random ids, a lost op-id memory) moves stock that no order
//     records. Checked in Redis (order states against the ledger) and in PostgreSQL
//     (order rows against lot rows).
//
// Conservation is checked per lot, in both stores: the buckets sum to what was imported
// plus what the warehouse's moves brought in from outside, less what they sent out (the
// moves from and to "external": a lot's registration, a receipt's count, an adjustment;
// a lot registered during the run was imported with nothing), none is negative, and
// each bucket equals its imported quantity plus the moves into it minus the moves out
// of it, as recorded in PostgreSQL's moves table. The last one catches a result lost on
// the way to PostgreSQL and a ledger move made twice under the same op id. Damaged,
// recalled and broken returned units stay in the lot, in its defective bucket.

// buckets of one lot, in the order sellable, reserved, allocated, hidden, shipped,
// defective.
type buckets [6]int64

var bucketNames = [6]string{stock.Sellable, stock.Reserved, stock.Allocated, stock.Hidden, stock.Shipped, stock.Defective}

func bucketIndex(name string) int { return slices.Index(bucketNames[:], name) }

func (b buckets) total() int64 { return b[0] + b[1] + b[2] + b[3] + b[4] + b[5] }

func bucketsOf(l stock.Lot) buckets {
	return buckets{l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective}
}

type lotKey struct{ SKU, Lot string }

func (k lotKey) String() string { return k.SKU + "/" + k.Lot }

// orderState is an order with the seq of its newest result.
type orderState struct {
	Seq   int64
	Order *event.OrderSnapshot
}

// snapshot is everything the checks look at, gathered after quiescence.
type snapshot struct {
	// imported is every lot's buckets at import.
	imported map[lotKey]buckets
	// redisLots and pgLots are the lots now; a SKU that Redis never loaded is absent
	// from redisLots.
	redisLots, pgLots map[lotKey]buckets
	// moved is, per lot, the net of PostgreSQL's moves per bucket (in minus out);
	// external the net of its moves from outside (from external minus to external).
	moved    map[lotKey]buckets
	external map[lotKey]int64
	// transit is, per lot, the net of its transfer moves (to a transit lot minus from
	// one): units that left one lot for another of the same SKU, never the network's.
	transit map[lotKey]int64
	// location is each lot's location (absent: the default one).
	location map[lotKey]string
	// redisOrders and pgOrders by lcid; redisOrders also has the seq of each SKU's
	// entity (the warehouse's events, "sku:<sku>"), with no order.
	redisOrders, pgOrders map[string]orderState
	// inbox is the seqs of the inbox rows per entity.
	inbox map[string][]int64
	// sent is every distinct event id sent.
	sent []string
	// persisted is every event id with an inbox row.
	persisted map[string]bool
	// expiries counts, per lcid, the applied order.reservation_expired rows of the inbox.
	expiries map[string]int
	// abandoned are the abandoned orders' lcids (loadgen.Workload.Abandoned); at is when
	// the snapshot was gathered.
	abandoned []string
	at        time.Time
}

// findings are what the checks found; every count must be zero.
type findings struct {
	Lost            []string
	SeqBroken       []string // entities
	HoldingMismatch []string // lots, "store sku/lot: ..."
	Unconserved     []string // lots, "store sku/lot: ..."
	Oversold        []string // SKUs
	// OversoldLocations are the locations whose lots hold (reserved, allocated, shipped)
	// more than came in there, "store location: ..."; Locations the PostgreSQL store's
	// figures per location (with a location besides the default one).
	OversoldLocations []string
	Locations         []loadgen.LocationFigures
	// ExpiredTwice are the orders with more than one applied expiry; Unexpired the
	// abandoned orders still placed in PostgreSQL past their hold (and the grace), or
	// placed without the hold they were given.
	ExpiredTwice []string
	Unexpired    []string
	Parked       int
}

func (f findings) doubleApplied() int { return len(f.SeqBroken) + len(f.HoldingMismatch) }

// check runs every check on s.
func check(s snapshot) findings {
	var f findings
	for _, id := range s.sent {
		if !s.persisted[id] {
			f.Lost = append(f.Lost, id)
		}
	}

	// Turns: inbox seqs of each entity are exactly 1..(its seq in Redis).
	entities := map[string]bool{}
	for e := range s.inbox {
		entities[e] = true
	}
	for e := range s.redisOrders {
		entities[e] = true
	}
	for e := range entities {
		seqs := slices.Sorted(slices.Values(s.inbox[e]))
		ok := int64(len(seqs)) == s.redisOrders[e].Seq
		for i, q := range seqs {
			if q != int64(i+1) {
				ok = false
			}
		}
		if !ok {
			f.SeqBroken = append(f.SeqBroken, fmt.Sprintf("%s: redis seq %d, inbox seqs %v", e, s.redisOrders[e].Seq, abbreviate(seqs)))
		}
	}

	// Holdings, conservation, oversold: per store.
	for _, store := range []struct {
		name   string
		lots   map[lotKey]buckets
		orders map[string]orderState
	}{{"redis", s.redisLots, s.redisOrders}, {"postgres", s.pgLots, s.pgOrders}} {
		held := holdings(store.orders)
		skuTotal, skuHeld := map[string]int64{}, map[string]int64{}
		byLoc := locationFigures{}
		negative := map[string]bool{}
		// Every lot: imported, or registered during the run (in a store or in the moves).
		lots := map[lotKey]bool{}
		for _, m := range []map[lotKey]buckets{s.imported, store.lots, s.moved} {
			for k := range m {
				lots[k] = true
			}
		}
		for k := range lots {
			imp := s.imported[k]
			cur, loaded := store.lots[k]
			if !loaded {
				cur = imp // never loaded into Redis (or its registration never applied): as imported
			}
			want := held[k]
			for _, i := range []int{1, 2, 4} { // reserved, allocated, shipped
				if cur[i] != want[i] {
					f.HoldingMismatch = append(f.HoldingMismatch, fmt.Sprintf("%s %s: %s %d, orders hold %d", store.name, k, bucketNames[i], cur[i], want[i]))
				}
			}
			if cur.total() != imp.total()+s.external[k]+s.transit[k] {
				f.Unconserved = append(f.Unconserved, fmt.Sprintf("%s %s: buckets sum to %d, imported %d, from outside %+d, by transfers %+d",
					store.name, k, cur.total(), imp.total(), s.external[k], s.transit[k]))
			}
			mv := s.moved[k]
			for i := range cur {
				if cur[i] < 0 {
					negative[k.SKU] = true
					f.Unconserved = append(f.Unconserved, fmt.Sprintf("%s %s: %s is %d", store.name, k, bucketNames[i], cur[i]))
				}
				if imp[i]+mv[i] != cur[i] {
					f.Unconserved = append(f.Unconserved, fmt.Sprintf("%s %s: %s is %d, imported %d + moves %+d", store.name, k, bucketNames[i], cur[i], imp[i], mv[i]))
				}
			}
			skuTotal[k.SKU] += imp.total() + s.external[k] + s.transit[k]
			skuHeld[k.SKU] += cur[1] + cur[2] + cur[4]
			byLoc.add(s, k, cur)
		}
		f.OversoldLocations = append(f.OversoldLocations, byLoc.oversold(store.name)...)
		if store.name == "postgres" && len(byLoc) > 1 {
			f.Locations = byLoc.figures()
		}
		for sku, h := range skuHeld {
			if h > skuTotal[sku] || negative[sku] {
				f.Oversold = append(f.Oversold, fmt.Sprintf("%s %s: %d held of %d", store.name, sku, h, skuTotal[sku]))
			}
		}
	}
	f.Unconserved = append(f.Unconserved, transitUnbalanced(s)...)
	f.ExpiredTwice, f.Unexpired = checkExpiries(s)
	sort.Strings(f.Lost)
	sort.Strings(f.SeqBroken)
	sort.Strings(f.HoldingMismatch)
	sort.Strings(f.Unconserved)
	sort.Strings(f.Oversold)
	sort.Strings(f.OversoldLocations)
	return f
}

// transitUnbalanced lists the SKUs whose transfer moves do not net to zero: a transfer
// moves units between two lots of one SKU in one operation, so what leaves one lot for
// transit arrives in another.
func transitUnbalanced(s snapshot) []string {
	net := map[string]int64{}
	for k, n := range s.transit {
		net[k.SKU] += n
	}
	var out []string
	for sku, n := range net {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s: transfer moves net %+d", sku, n))
		}
	}
	return out
}

// locationFigures sums one store's lots per location.
type locationFigures map[string]*loadgen.LocationFigures

// add counts lot k, whose buckets are cur, at its location.
func (m locationFigures) add(s snapshot, k lotKey, cur buckets) {
	loc := cmp.Or(s.location[k], stock.DefaultLocation)
	f := m[loc]
	if f == nil {
		f = &loadgen.LocationFigures{Location: loc}
		m[loc] = f
	}
	f.Lots++
	f.In += s.imported[k].total() + s.external[k] + s.transit[k]
	f.Sellable += cur[0]
	f.Held += cur[1] + cur[2]
	f.Shipped += cur[4]
	f.Defective += cur[5]
	if n := s.transit[k]; n < 0 {
		f.TransferredOut -= n
	} else {
		f.TransferredIn += n
	}
}

// oversold lists the locations whose lots hold or shipped more than came in there.
func (m locationFigures) oversold(store string) []string {
	var out []string
	for loc, f := range m {
		if f.Held+f.Shipped > f.In {
			out = append(out, fmt.Sprintf("%s %s: %d held or shipped of %d", store, loc, f.Held+f.Shipped, f.In))
		}
	}
	return out
}

// figures are the locations' figures by id.
func (m locationFigures) figures() []loadgen.LocationFigures {
	out := make([]loadgen.LocationFigures, 0, len(m))
	for _, f := range m {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b loadgen.LocationFigures) int { return strings.Compare(a.Location, b.Location) })
	return out
}

// checkExpiries finds the orders expired twice and the abandoned orders whose expiry
// was lost: still placed in PostgreSQL with a hold that ended expiryGrace before the
// snapshot, or without the hold their placement gave them. An abandoned order that was
// refused (a shortage) or expired is fine.
func checkExpiries(s snapshot) (twice, unexpired []string) {
	for lcid, n := range s.expiries {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s: expired %d times", lcid, n))
		}
	}
	for _, lcid := range s.abandoned {
		st := s.pgOrders[lcid]
		o := st.Order
		if o == nil || o.Status != event.StatusPlaced {
			continue
		}
		switch {
		case o.HoldUntil == nil:
			unexpired = append(unexpired, lcid+": placed without its hold")
		case !o.HoldUntil.After(s.at.Add(-expiryGrace)):
			unexpired = append(unexpired, fmt.Sprintf("%s: placed, its hold ended %s before the check", lcid, s.at.Sub(*o.HoldUntil).Round(time.Millisecond)))
		}
	}
	sort.Strings(twice)
	sort.Strings(unexpired)
	return twice, unexpired
}

// holdings is, per lot, what the orders hold in each bucket.
func holdings(orders map[string]orderState) map[lotKey]buckets {
	out := map[lotKey]buckets{}
	for _, st := range orders {
		o := st.Order
		if o == nil {
			continue
		}
		var i int
		switch {
		case o.Status == event.StatusShipped:
			i = 4
		case o.Status == event.StatusPlaced && o.Allocation == "allocated":
			i = 2
		case o.Status == event.StatusPlaced:
			i = 1
		default:
			continue // cancelled, rejected: nothing held
		}
		for _, ln := range o.Lines {
			for _, lq := range ln.Lots {
				k := lotKey{ln.SKU, lq.LotID}
				b := out[k]
				b[i] += lq.Qty
				out[k] = b
			}
			// What came back of a shipment (order.returned) left the shipped bucket.
			for _, lq := range ln.Returned {
				k := lotKey{ln.SKU, lq.LotID}
				b := out[k]
				b[i] -= lq.Qty
				out[k] = b
			}
		}
	}
	return out
}

func abbreviate(seqs []int64) string {
	if len(seqs) <= 12 {
		return fmt.Sprint(seqs)
	}
	return fmt.Sprintf("%v ... %v (%d)", seqs[:6], seqs[len(seqs)-6:], len(seqs))
}

// gather reads the snapshot from Redis and PostgreSQL.
func (e *Env) gather(ctx context.Context) (snapshot, error) {
	s := snapshot{
		imported: map[lotKey]buckets{}, redisLots: map[lotKey]buckets{}, pgLots: map[lotKey]buckets{},
		moved: map[lotKey]buckets{}, external: map[lotKey]int64{}, transit: map[lotKey]int64{}, location: map[lotKey]string{},
		redisOrders: map[string]orderState{}, pgOrders: map[string]orderState{},
		inbox: map[string][]int64{}, persisted: map[string]bool{}, expiries: map[string]int{},
		abandoned: e.workload.Abandoned, at: time.Now(),
	}
	e.mu.Lock()
	s.sent = slices.Clone(e.sent)
	e.mu.Unlock()
	led, err := ledger.New(ledger.Config{Redis: e.rc, Prefix: KeyPrefix})
	if err != nil {
		return s, err
	}
	for _, sku := range e.workload.Inventory {
		for _, l := range sku.Lots {
			s.imported[lotKey{sku.SKU, l.LotID}] = bucketsOf(l)
			s.location[lotKey{sku.SKU, l.LotID}] = l.Location
		}
	}
	for _, sku := range e.workload.SKUs() {
		r, err := led.Snapshot(ctx, sku)
		if errors.Is(err, stock.ErrNotLoaded) {
			continue // never loaded, or a new SKU whose registration was refused
		}
		if err != nil {
			return s, err
		}
		for _, l := range r.Lots {
			s.redisLots[lotKey{sku, l.LotID}] = bucketsOf(l)
		}
	}
	var lots []struct {
		SKU, LotID, Location                                      string
		Sellable, Reserved, Allocated, Hidden, Shipped, Defective int64
	}
	if err := e.db.WithContext(ctx).Raw(`SELECT sku, lot_id, location, sellable, reserved, allocated, hidden, shipped, defective FROM lots`).Scan(&lots).Error; err != nil {
		return s, err
	}
	for _, l := range lots {
		s.pgLots[lotKey{l.SKU, l.LotID}] = buckets{l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective}
		s.location[lotKey{l.SKU, l.LotID}] = l.Location
	}
	var moves []struct {
		SKU, LotID, FromBucket, ToBucket string
		Qty                              int64
	}
	if err := e.db.WithContext(ctx).Raw(`SELECT sku, lot_id, from_bucket, to_bucket, sum(qty) AS qty FROM moves GROUP BY 1, 2, 3, 4`).Scan(&moves).Error; err != nil {
		return s, err
	}
	for _, m := range moves {
		k := lotKey{m.SKU, m.LotID}
		b := s.moved[k]
		if i := bucketIndex(m.FromBucket); i >= 0 {
			b[i] -= m.Qty
		}
		if i := bucketIndex(m.ToBucket); i >= 0 {
			b[i] += m.Qty
		}
		s.moved[k] = b
		switch {
		case m.FromBucket == stock.External:
			s.external[k] += m.Qty
		case m.ToBucket == stock.External:
			s.external[k] -= m.Qty
		case m.FromBucket == stock.Transit:
			s.transit[k] += m.Qty
		case m.ToBucket == stock.Transit:
			s.transit[k] -= m.Qty
		}
	}
	for _, lcid := range e.workload.Orders {
		st, err := order.LoadState(ctx, e.rc, KeyPrefix, lcid)
		if err != nil {
			return s, err
		}
		if st.Seq == 0 && st.Order == nil && len(st.Parked) == 0 {
			continue
		}
		s.redisOrders[lcid] = orderState{Seq: st.Seq, Order: st.Order}
	}
	for _, sku := range e.workload.SKUs() {
		entity := domain.SKUEntity(sku)
		st, err := order.LoadState(ctx, e.rc, KeyPrefix, entity)
		if err != nil {
			return s, err
		}
		if st.Seq > 0 {
			s.redisOrders[entity] = orderState{Seq: st.Seq}
		}
	}
	var orders []struct {
		LCID       string `gorm:"column:lcid"`
		Status     string
		Allocation string
		Lines      []byte
		Seq        int64
		HoldUntil  *time.Time
	}
	if err := e.db.WithContext(ctx).Raw(`SELECT lcid, status, coalesce(allocation, '') AS allocation, lines::text AS lines, seq, hold_until FROM orders`).Scan(&orders).Error; err != nil {
		return s, err
	}
	for _, o := range orders {
		snap := &event.OrderSnapshot{LCID: o.LCID, Status: o.Status, Allocation: o.Allocation, HoldUntil: o.HoldUntil}
		if err := json.Unmarshal(o.Lines, &snap.Lines); err != nil {
			return s, fmt.Errorf("chaos: lines of %s: %w", o.LCID, err)
		}
		s.pgOrders[o.LCID] = orderState{Seq: o.Seq, Order: snap}
	}
	var inbox []struct {
		EventID, Entity, Type, Outcome string
		Seq                            int64
	}
	if err := e.db.WithContext(ctx).Raw(`SELECT event_id, entity, type, outcome, seq FROM inbox`).Scan(&inbox).Error; err != nil {
		return s, err
	}
	for _, r := range inbox {
		s.persisted[r.EventID] = true
		s.inbox[r.Entity] = append(s.inbox[r.Entity], r.Seq)
		if r.Type == string(event.OrderReservationExpired) && r.Outcome == event.Applied {
			s.expiries[r.Entity]++
		}
	}
	return s, nil
}

// parked counts events still parked on their orders in Redis (none should be, once
// every order's events all arrived).
func (e *Env) parked(ctx context.Context) (int, error) {
	n := 0
	for _, lcid := range e.workload.Orders {
		st, err := order.LoadState(ctx, e.rc, KeyPrefix, lcid)
		if err != nil {
			return 0, err
		}
		n += len(st.Parked)
	}
	return n, nil
}

// Check gathers the state of both stores and runs every check; it also counts the
// outcomes and the DLQs for the report.
func (e *Env) Check(ctx context.Context) (Report, error) {
	r := e.report
	s, err := e.gather(ctx)
	if err != nil {
		return r, fmt.Errorf("chaos: gather: %w", err)
	}
	f := check(s)
	led, err := ledger.New(ledger.Config{Redis: e.rc, Prefix: KeyPrefix})
	if err != nil {
		return r, err
	}
	rep, err := persist.Reconcile(ctx, persist.ReconcileConfig{
		DB:     e.db,
		SKUs:   led,
		Orders: workloadOrders{e},
	})
	if err != nil {
		return r, fmt.Errorf("chaos: reconcile: %w", err)
	}
	r.Lost = len(f.Lost)
	r.DoubleApplied = f.doubleApplied()
	r.Drift = rep.Remaining()
	r.Oversold = len(f.Oversold)
	r.OversoldLocations = len(f.OversoldLocations)
	r.Locations = f.Locations
	r.Conserved = len(f.Unconserved) == 0
	r.SeqGaps = len(f.SeqBroken)
	r.HoldingMismatches = len(f.HoldingMismatch)
	r.UnconservedLots = len(f.Unconserved)
	r.Abandoned = len(s.abandoned)
	r.ExpiredTwice, r.ExpiriesLost = len(f.ExpiredTwice), len(f.Unexpired)
	for _, n := range s.expiries {
		r.Expired += min(n, 1)
	}
	r.Details.Expiries = first(append(slices.Clone(f.ExpiredTwice), f.Unexpired...))
	for _, d := range rep.Drifts {
		if !d.Repaired {
			r.Details.Drift = append(r.Details.Drift, d.String())
		}
	}
	r.Details.Lost = first(f.Lost)
	r.Details.SeqGaps = first(f.SeqBroken)
	r.Details.Holdings = first(f.HoldingMismatch)
	r.Details.Unconserved = first(f.Unconserved)
	r.Details.Oversold = first(append(slices.Clone(f.Oversold), f.OversoldLocations...))
	r.Details.Drift = first(r.Details.Drift)
	if r.Parked, err = e.parked(ctx); err != nil {
		return r, err
	}
	if r.OrdersDLQ, err = e.queueDepth(ctx, e.orders.DLQURL); err != nil {
		return r, err
	}
	if r.ResultsDLQ, err = e.queueDepth(ctx, e.results.DLQURL); err != nil {
		return r, err
	}
	var outcomes []struct {
		Type, Outcome, Reason string
		N                     int
	}
	if err := e.db.WithContext(ctx).Raw(`SELECT type, outcome, reason, count(*) AS n FROM inbox GROUP BY 1, 2, 3`).Scan(&outcomes).Error; err != nil {
		return r, err
	}
	r.RejectedBy = map[string]int{}
	r.Warehouse = loadgen.Outcomes{}
	for _, o := range outcomes {
		if o.Outcome == event.Applied {
			r.Applied += o.N
		} else {
			r.Rejected += o.N
			r.RejectedBy[o.Reason] += o.N
		}
		if loadgen.IsWarehouse(event.Type(o.Type)) {
			r.Warehouse.Add(o.Outcome, o.Reason, o.N)
		}
	}
	for _, p := range e.all() {
		r.UnexpectedExits += p.unexpectedExits()
	}
	r.Evidence = e.evidence()
	if e.outbound != nil {
		if r.Outbound, err = e.checkOutbound(ctx); err != nil {
			return r, fmt.Errorf("chaos: outbound: %w", err)
		}
	}
	return r, nil
}

// workloadOrders is the orders of the run in chaos's Redis, for persist.Reconcile: the
// workload names every lcid, and nothing else writes to this Redis.
type workloadOrders struct{ e *Env }

func (o workloadOrders) Order(ctx context.Context, lcid string) (*event.OrderSnapshot, int64, error) {
	st, err := order.LoadState(ctx, o.e.rc, KeyPrefix, lcid)
	return st.Order, st.Seq, err
}

func (o workloadOrders) ScanOrders(ctx context.Context, fn func(lcid string) error) error {
	for _, lcid := range o.e.workload.Orders {
		if n, err := o.e.rc.Exists(ctx, order.StateKey(KeyPrefix, lcid)).Result(); err != nil {
			return err
		} else if n == 0 {
			continue
		}
		if err := fn(lcid); err != nil {
			return err
		}
	}
	return nil
}

func first(s []string) []string { return s[:min(len(s), 10)] }
