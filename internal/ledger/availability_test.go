package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/testenv"
)

var flagAvailSeqs = 300

// backorderSome queues waiting demand on sku half the time: a backorder of a few units
// on a random date and mode, as line line of a holder of its own, so that the
// comparisons after it read a SKU whose queue holds units back.
func backorderSome(t *testing.T, l *Ledger, rng *rand.Rand, sku, line string) {
	t.Helper()
	if rng.IntN(2) == 0 {
		return
	}
	_, err := l.Apply(ctx, stock.BackorderRequest{OpID: "bo-" + line, SKU: sku, Holder: "waiter", Line: line,
		Qty: 1 + rng.Int64N(8), TargetDate: genDates[rng.IntN(len(genDates))],
		Mode: stock.Mode([]string{"ship", "reserve"}[rng.IntN(2)]), Class: rng.IntN(3)})
	if err != nil {
		t.Fatalf("backorder on %s: %v", sku, err)
	}
}

// TestAvailabilityAgreesWithAllocation: for random SKUs, lots, dates and modes, after a
// random history of operations and backorders (the queue's demand), availability says
// n; an allocation of n+1 fails with the reason availability gave for n+1, and one of n
// succeeds, taking from the lots availability listed, in that order and quantities.
//
// Seeds found failing run first: 15515828154773717330 caught the routed walk stopping
// early where the caps read so far did not cover the allocation and the waiting demand
// (capsCover in ledger.lua).
func TestAvailabilityAgreesWithAllocation(t *testing.T) {
	for _, seed := range []uint64{15515828154773717330, rand.Uint64()} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkAvailabilityAgrees(t, seed) })
	}
}

func checkAvailabilityAgrees(t *testing.T, seed uint64) {
	rc, prefix := testenv.Redis(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	checked, waited, refused := 0, 0, map[string]int{}
	for seq := range flagAvailSeqs {
		skus, steps := genSequence(rng, 1+rng.IntN(15))
		l, err := New(Config{Redis: rc, Prefix: fmt.Sprintf("%s:%d", prefix, seq), Loader: newMemLoader(skus...)})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			st.run(l) // a history: its errors are the other property test's concern
		}
		for k := range 6 {
			s := skus[rng.IntN(len(skus))]
			date, mode := genDates[rng.IntN(len(genDates))], stock.Mode([]string{"ship", "reserve"}[rng.IntN(2)])
			backorderSome(t, l, rng, s.SKU, fmt.Sprint(k))
			a, err := l.Availability(ctx, AvailabilityRequest{SKU: s.SKU, TargetDate: date, Mode: mode})
			if err != nil {
				t.Fatalf("seq %d: availability %s %s %s: %v", seq, s.SKU, date, mode, err)
			}
			n := a.Available
			if want := queueDemand(t, l, s.SKU); a.Waiting != want {
				t.Fatalf("seq %d: availability says %d waiting, the queue waits for %d", seq, a.Waiting, want)
			}
			snap, err := l.Snapshot(ctx, s.SKU)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[string]stock.Lot{}
			for _, lt := range snap.Lots {
				byID[lt.LotID] = lt
			}
			for _, c := range a.Candidates {
				lt := byID[c.LotID]
				want := Candidate{LotID: lt.LotID, Kind: lt.Kind, BestBefore: lt.BestBefore, RegSeq: lt.RegSeq, ValidFrom: lt.ValidFrom, ValidTo: lt.ValidTo, Sellable: lt.Sellable, Location: lt.Location}
				if lt.Kind == stock.KindPlanned {
					want.BestBefore = "" // planned lots sort without one
				}
				if c != want || !lt.Good || lt.Sellable == 0 || date < lt.ValidFrom || date > lt.ValidTo {
					t.Fatalf("seq %d: candidate %+v, the lot is %+v", seq, c, lt)
				}
			}
			over, err := l.Availability(ctx, AvailabilityRequest{SKU: s.SKU, TargetDate: date, Mode: mode, Qty: n + 1})
			if err != nil || over.OK || over.Reason == "" || over.Available != n || len(over.Take) != 0 {
				t.Fatalf("seq %d: availability of n+1=%d: %+v %v", seq, n+1, over, err)
			}
			op := fmt.Sprintf("avail-%d", k)
			_, err = l.Apply(ctx, stock.AllocateRequest{OpID: op + "-over", SKU: s.SKU, Qty: n + 1, TargetDate: date, Mode: mode})
			if stock.Reason(err) != over.Reason || err.Error() != over.Err().Error() {
				t.Fatalf("seq %d: allocation of n+1=%d (%s %s): %v; availability said %s (%s)", seq, n+1, date, mode, err, over.Reason, over.Detail)
			}
			refused[over.Reason]++
			if n == 0 {
				continue
			}
			at, err := l.Availability(ctx, AvailabilityRequest{SKU: s.SKU, TargetDate: date, Mode: mode, Qty: n})
			if err != nil || !at.OK || at.Reason != "" {
				t.Fatalf("seq %d: availability of n=%d: %+v %v", seq, n, at, err)
			}
			r, err := l.Apply(ctx, stock.AllocateRequest{OpID: op, SKU: s.SKU, Qty: n, TargetDate: date, Mode: mode})
			if err != nil {
				t.Fatalf("seq %d: allocation of n=%d (%s %s): %v; availability %+v", seq, n, date, mode, err, at)
			}
			var took []stock.LotQty
			for _, m := range r.Moves {
				took = append(took, stock.LotQty{LotID: m.LotID, Qty: m.Qty})
			}
			if !slices.Equal(took, at.Take) {
				t.Fatalf("seq %d: allocation of %d took %v, availability listed %v", seq, n, took, at.Take)
			}
			// The lots taken are listed candidates, in their order (the first ones, but
			// for those a location's safety stock keeps).
			next := 0
			for _, q := range at.Take {
				i := slices.IndexFunc(at.Candidates[next:], func(c Candidate) bool { return c.LotID == q.LotID })
				if i < 0 {
					t.Fatalf("seq %d: take %v is not in the order of the candidates %+v", seq, at.Take, at.Candidates)
				}
				next += i + 1
			}
			checked++
			if a.Waiting > 0 {
				waited++
			}
		}
	}
	if checked < flagAvailSeqs || waited == 0 || refused["ERR_SHORTAGE"] == 0 || refused["ERR_SAFETY_STOCK"] == 0 {
		t.Fatalf("too few cases: %d allocations checked, %d of them with a queue, refusals %v", checked, waited, refused)
	}
	t.Logf("%d allocations checked, %d of them with a queue, refusals %v", checked, waited, refused)
}

// queueDemand is what sku's queue waits for, from its entries.
func queueDemand(t *testing.T, l *Ledger, sku string) int64 {
	t.Helper()
	q, err := l.Queue(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range q {
		n += e.Want
	}
	return n
}

// TestAvailabilityIsReadOnly: the answer moves nothing and bumps no version, and the
// script cannot write (its no-writes flag).
func TestAvailabilityIsReadOnly(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	s := stock.SKU{SKU: "A", SafetyStock: 2, Lots: []stock.Lot{
		lot("L1", stock.KindOnHand, 1, "2027-01-01", 5), lot("L2", stock.KindOnHand, 2, "2026-12-20", 3), lot("P1", stock.KindPlanned, 3, "", 10)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip, Qty: 9})
	if err != nil {
		t.Fatal(err)
	}
	if a.Sellable != 18 || a.Available != 16 || !a.OK || !slices.Equal(a.Take, []stock.LotQty{{LotID: "L2", Qty: 3}, {LotID: "L1", Qty: 5}, {LotID: "P1", Qty: 1}}) {
		t.Fatalf("availability %+v", a)
	}
	before, _ := l.Snapshot(ctx, "A")
	for range 3 {
		if _, err := l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeReserve, Qty: 18}); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := l.Snapshot(ctx, "A")
	if !slices.Equal(before.Lots, after.Lots) || before.Version != after.Version {
		t.Fatalf("availability changed the SKU: %+v -> %+v", before, after)
	}
	err = rc.Eval(ctx, "#!lua flags=no-writes\nreturn redis.call('SET', KEYS[1], 'x')", []string{Key(prefix, "A") + ":probe"}).Err()
	if err == nil {
		t.Fatal("a no-writes script wrote")
	}
}

// TestAvailabilityMany: a cart gets the same answers as single calls, a bad request or
// an unknown SKU fails alone, and a SKU not loaded yet is loaded.
func TestAvailabilityMany(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	var skus []stock.SKU
	for i := range 20 {
		skus = append(skus, stock.SKU{SKU: fmt.Sprint("C", i), SafetyStock: int64(i % 3), Lots: []stock.Lot{
			lot("L1", stock.KindOnHand, 1, "2027-01-01", int64(i)), lot("P1", stock.KindPlanned, 2, "", 4)}})
	}
	loader := newMemLoader(skus...)
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: loader})
	if err != nil {
		t.Fatal(err)
	}
	var rs []AvailabilityRequest
	for _, s := range skus {
		rs = append(rs, AvailabilityRequest{SKU: s.SKU, TargetDate: "2026-12-01", Mode: stock.ModeShip, Qty: 5})
	}
	rs = append(rs, AvailabilityRequest{SKU: "nope", TargetDate: "2026-12-01", Mode: stock.ModeShip},
		AvailabilityRequest{SKU: "C1", TargetDate: "2026-13-01", Mode: stock.ModeShip})
	got, err := l.AvailabilityMany(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got[20].Err, stock.ErrUnknownSKU) || !errors.Is(got[21].Err, stock.ErrInvalidRequest) {
		t.Fatalf("bad requests: %v, %v", got[20].Err, got[21].Err)
	}
	if loader.calls != 21 {
		t.Fatalf("loader called %d times, want 21 (20 SKUs and the unknown one)", loader.calls)
	}
	for i, s := range skus {
		one, err := l.Availability(ctx, rs[i])
		if err != nil || got[i].Err != nil {
			t.Fatalf("%s: %v / %v", s.SKU, err, got[i].Err)
		}
		if want := max(int64(i)+4-s.SafetyStock, 0); one.Available != want || got[i].Availability.Available != want || got[i].Availability.OK != (want >= 5) {
			t.Fatalf("%s: cart %+v, single %+v, want available %d", s.SKU, got[i].Availability, one, want)
		}
	}
}

// tripCounter counts the round trips a client makes: each command outside a pipeline,
// each pipeline.
type tripCounter struct{ calls, pipelines atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.calls.Add(1); return next(ctx, cmd) }
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.pipelines.Add(1); return next(ctx, cmds) }
}

// A cart of loaded SKUs is one round trip on a single Redis, however many SKUs it holds.
func TestAvailabilityManyIsOneRoundTrip(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	var skus []stock.SKU
	var rs []AvailabilityRequest
	for i := range 50 {
		skus = append(skus, stock.SKU{SKU: fmt.Sprint("R", i), Lots: []stock.Lot{lot("L1", stock.KindOnHand, 1, "", 5)}})
		rs = append(rs, AvailabilityRequest{SKU: fmt.Sprint("R", i), TargetDate: "2026-12-01", Mode: stock.ModeReserve, Qty: 1})
	}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(skus...)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AvailabilityMany(ctx, rs); err != nil { // loads them, and the script
		t.Fatal(err)
	}
	c := &tripCounter{}
	rc.AddHook(c)
	got, err := l.AvailabilityMany(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range got {
		if a.Err != nil || !a.Availability.OK {
			t.Fatalf("%d: %+v", i, a)
		}
	}
	if c.pipelines.Load() != 1 || c.calls.Load() != 0 {
		t.Fatalf("%d pipelines and %d single calls for a cart of 50, want 1 and 0", c.pipelines.Load(), c.calls.Load())
	}
}

// Availability answers per location beside the total: each location's candidates'
// sellable, and what an allocation pinned there gets (the SKU's safety stock over that
// location alone), which a pinned allocation confirms; a SKU whose candidates are all at
// the default location has no per-location answer.
func TestAvailabilityPerLocation(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	late := locLot("late", "wh-2", 4, "2027-01-01", 7)
	late.ValidFrom = "2027-01-01" // not a candidate on 2026-12-01
	s := stock.SKU{SKU: "A", SafetyStock: 2, Lots: []stock.Lot{
		locLot("d1", "", 0, "2027-03-01", 4),
		locLot("s1", "store-1", 1, "2027-02-01", 3),
		locLot("s2", "store-1", 2, "2027-04-01", 2),
		locLot("w1", "wh-2", 3, "2027-05-01", 5),
		late,
	}}
	plain := stock.SKU{SKU: "B", Lots: []stock.Lot{lot("b1", stock.KindOnHand, 0, "2027-01-01", 3)}}
	l, err := New(Config{Redis: rc, Prefix: prefix, Loader: newMemLoader(s, plain)})
	if err != nil {
		t.Fatal(err)
	}
	locs := []stock.Location{
		stock.DefaultLocationSettings(),
		{ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true},
		{ID: "wh-2", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
	}
	for _, c := range []struct {
		mode stock.Mode
		qty  int64
		want []LocationAvailability
	}{
		{stock.ModeShip, 3, []LocationAvailability{{"default", 4, 2, false, 0}, {"store-1", 5, 3, true, 0}, {"wh-2", 5, 3, true, 0}}},
		{stock.ModeReserve, 5, []LocationAvailability{{"default", 4, 4, false, 0}, {"store-1", 5, 5, true, 0}, {"wh-2", 5, 5, true, 0}}},
		{stock.ModeShip, 0, []LocationAvailability{{"default", 4, 2, false, 0}, {"store-1", 5, 3, false, 0}, {"wh-2", 5, 3, false, 0}}},
	} {
		a, err := l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: c.mode, Qty: c.qty})
		if err != nil {
			t.Fatal(err)
		}
		if a.Sellable != 14 || !slices.Equal(a.Locations, c.want) {
			t.Fatalf("%s qty %d: sellable %d, locations %+v, want 14, %+v", c.mode, c.qty, a.Sellable, a.Locations, c.want)
		}
	}
	// Each location's available is what an allocation pinned there gets, and no more.
	a, err := l.Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip})
	if err != nil {
		t.Fatal(err)
	}
	for i, la := range a.Locations {
		req := alloc(fmt.Sprintf("over%d", i), "A", la.Available+1, "2026-12-01", stock.ModeShip)
		req.Route = &stock.Route{Pinned: la.Location, Locations: locs}
		if _, err := l.Apply(ctx, req); !errors.Is(err, stock.ErrSafetyStock) && !errors.Is(err, stock.ErrShortage) {
			t.Fatalf("%s: an allocation of %d pinned there: %v, want a refusal", la.Location, la.Available+1, err)
		}
	}
	b, err := l.Availability(ctx, AvailabilityRequest{SKU: "B", TargetDate: "2026-12-01", Mode: stock.ModeShip})
	if err != nil {
		t.Fatal(err)
	}
	if b.Locations != nil || b.Available != 3 {
		t.Fatalf("a SKU at the default location only: %+v", b)
	}
	// And it gets that much there: each on a ledger of its own, over the same stock.
	for i, la := range a.Locations {
		li, err := New(Config{Redis: rc, Prefix: fmt.Sprintf("%s:fit%d", prefix, i), Loader: newMemLoader(s)})
		if err != nil {
			t.Fatal(err)
		}
		req := alloc("fit", "A", la.Available, "2026-12-01", stock.ModeShip)
		req.Route = &stock.Route{Pinned: la.Location, Locations: locs}
		r, err := li.Apply(ctx, req)
		if err != nil {
			t.Fatalf("%s: an allocation of %d pinned there: %v", la.Location, la.Available, err)
		}
		for _, lt := range r.Lots {
			if stock.LocationOf(lt) != la.Location {
				t.Fatalf("%s: took lot %s at %s", la.Location, lt.LotID, stock.LocationOf(lt))
			}
		}
	}
}

// Each location's available holds the SKU's waiting demand back as an allocation pinned
// there does: with a line waiting for 3 on a date no lot serves, an allocation pinned at
// a location gets its sellable less the safety stock less 3, and not one unit more.
func TestAvailabilityPerLocationHoldsTheQueueBack(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	d1, s1 := locLot("d1", "", 0, "2027-03-01", 4), locLot("s1", "store-1", 1, "2027-02-01", 6)
	d1.ValidFrom, s1.ValidFrom = "2026-12-01", "2026-12-01"
	s := stock.SKU{SKU: "A", SafetyStock: 1, Lots: []stock.Lot{d1, s1}}
	locs := []stock.Location{stock.DefaultLocationSettings(), {ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true}}
	ledgerWithQueue := func(p string) *Ledger {
		l, err := New(Config{Redis: rc, Prefix: p, Loader: newMemLoader(s)})
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Apply(ctx, stock.BackorderRequest{OpID: "bo", SKU: "A", Holder: "o1", Line: "1", Qty: 3, TargetDate: "2026-11-30", Mode: stock.ModeReserve})
		if err != nil || r.Queued != 3 {
			t.Fatalf("backorder: %+v %v", r, err)
		}
		return l
	}
	a, err := ledgerWithQueue(prefix).Availability(ctx, AvailabilityRequest{SKU: "A", TargetDate: "2026-12-01", Mode: stock.ModeShip})
	if err != nil {
		t.Fatal(err)
	}
	want := []LocationAvailability{{"default", 4, 0, false, 0}, {"store-1", 6, 2, false, 0}}
	if a.Waiting != 3 || a.Available != 6 || !slices.Equal(a.Locations, want) {
		t.Fatalf("availability %+v, want 3 waiting, 6 available, locations %+v", a, want)
	}
	for i, la := range a.Locations {
		l := ledgerWithQueue(fmt.Sprintf("%s:pin%d", prefix, i))
		over := alloc("over", "A", la.Available+1, "2026-12-01", stock.ModeShip)
		over.Route = &stock.Route{Pinned: la.Location, Locations: locs}
		if _, err := l.Apply(ctx, over); !errors.Is(err, stock.ErrSafetyStock) && !errors.Is(err, stock.ErrShortage) {
			t.Fatalf("%s: an allocation of %d pinned there: %v, want a refusal", la.Location, la.Available+1, err)
		}
		if la.Available == 0 {
			continue
		}
		fit := alloc("fit", "A", la.Available, "2026-12-01", stock.ModeShip)
		fit.Route = over.Route
		if _, err := l.Apply(ctx, fit); err != nil {
			t.Fatalf("%s: an allocation of %d pinned there: %v", la.Location, la.Available, err)
		}
	}
}

// TestNetworkAvailabilityAgreesWithRoutedAllocation: for random shops (each location's
// rank, shipping and enabled drawn) after a random history, the network's answer says n;
// an allocation routed by rank over the shop's locations, as an order without routing
// fields is once the shop has registered them, fails for n+1 with the network's reason
// and detail, and for n takes exactly the network's take.
func TestNetworkAvailabilityAgreesWithRoutedAllocation(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	checked, waited, refused := 0, 0, map[string]int{}
	for seq := range flagAvailSeqs / 2 {
		skus, steps := genSequence(rng, 1+rng.IntN(15))
		l, err := New(Config{Redis: rc, Prefix: fmt.Sprintf("%s:n%d", prefix, seq), Loader: newMemLoader(skus...)})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range steps {
			st.run(l)
		}
		var locs []stock.Location
		for _, id := range []string{stock.DefaultLocation, "wh-2", "store-1"} {
			locs = append(locs, stock.Location{ID: id, Kind: stock.LocationWarehouse, Rank: rng.IntN(3),
				Ships: rng.IntN(4) > 0, Enabled: rng.IntN(5) > 0})
		}
		route := &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}
		for k := range 4 {
			s := skus[rng.IntN(len(skus))]
			date, mode := genDates[rng.IntN(len(genDates))], stock.Mode([]string{"ship", "reserve"}[rng.IntN(2)])
			backorderSome(t, l, rng, s.SKU, fmt.Sprint(k))
			var waiting int64
			ask := func(qty int64) NetworkAvailability {
				a, err := l.Availability(ctx, AvailabilityRequest{SKU: s.SKU, TargetDate: date, Mode: mode, Qty: qty})
				if err != nil {
					t.Fatalf("seq %d: availability: %v", seq, err)
				}
				waiting = a.Waiting
				return a.Network(locs)
			}
			n := ask(0).Available
			op := fmt.Sprintf("net-%d", k)
			over := ask(n + 1)
			_, err := l.Apply(ctx, stock.AllocateRequest{OpID: op + "-over", SKU: s.SKU, Qty: n + 1, TargetDate: date, Mode: mode, Route: route})
			if over.OK || stock.Reason(err) != over.Reason || !strings.HasSuffix(err.Error(), "("+over.Detail+")") {
				t.Fatalf("seq %d: routed allocation of n+1=%d: %v; the network said %+v", seq, n+1, err, over)
			}
			refused[over.Reason]++
			if n == 0 {
				continue
			}
			at := ask(n)
			r, err := l.Apply(ctx, stock.AllocateRequest{OpID: op, SKU: s.SKU, Qty: n, TargetDate: date, Mode: mode, Route: route})
			if err != nil || !at.OK {
				t.Fatalf("seq %d: routed allocation of n=%d: %v; the network said %+v", seq, n, err, at)
			}
			var took []stock.LotQty
			for _, m := range r.Moves {
				took = append(took, stock.LotQty{LotID: m.LotID, Qty: m.Qty})
			}
			if !slices.Equal(took, at.Take) {
				t.Fatalf("seq %d: routed allocation of %d took %v, the network listed %v", seq, n, took, at.Take)
			}
			checked++
			if waiting > 0 {
				waited++
			}
		}
	}
	if checked < flagAvailSeqs/4 || waited == 0 || refused["ERR_SHORTAGE"] == 0 || refused["ERR_SAFETY_STOCK"] == 0 {
		t.Fatalf("too few cases: %d allocations checked, %d of them with a queue, refusals %v", checked, waited, refused)
	}
	t.Logf("%d allocations checked, %d of them with a queue, refusals %v", checked, waited, refused)
}
