// Package allocbench measures ledger.Allocate on one hot SKU against the allocation script
// before the warehouse operations, a JSON-document script, a PostgreSQL row-lock
// transaction and a trivial EVALSHA, with the same client concurrency in the same run, and
// times ledger.RegisterLot beside an allocation (junbanlab bench alloc). The script before
// the warehouse operations is read from git (ReadBaseline), not kept beside today's.
package allocbench

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// Defaults of Options.
const (
	LotsDefault     = 20
	DurationDefault = 5 * time.Second
	ClientsDefault  = 50
	RoundsDefault   = 5
)

// Options of a run.
type Options struct {
	// Lots is the number of lots of the hot SKU.
	Lots int
	// Duration is how long each variant runs.
	Duration time.Duration
	// Clients is the number of concurrent callers of every variant.
	Clients int
	// Sweep also measures junban at 1, 10, 100 and 1000 lots, usual and worst case
	// (a safety stock that makes every allocation read every lot).
	Sweep bool
	// Locations also measures one unit routed (ranked) over a SKU of LocationLots lots at
	// each of 1, 5, 20 and 50 locations, beside the same SKU unrouted.
	Locations bool
	// Prefix starts every Redis key of the run; the run deletes its keys at the end.
	Prefix string
	// Rounds is the number of turns each variant gets; figures are medians over them.
	Rounds int
	// PGConns is the PostgreSQL connection pool of the row-lock variant (0: Clients).
	// The Clients goroutines share it; a hot row serializes them anyway.
	PGConns int
	// Registration also times ledger.RegisterLot on SKUs of RegistrationLots lots, and an
	// allocation on the same SKUs, in rounds of their own.
	Registration bool
	// Baseline is the allocation script junban_before runs (ReadBaseline): one that takes
	// the hash layout of BaselineDefault's. Run refuses to start without it.
	Baseline string
}

// LocationCounts are the location counts Options.Locations measures, LocationLots lots at
// each.
var LocationCounts = []int{1, 5, 20, 50}

// LocationLots are the lots at each location of Options.Locations.
const LocationLots = 20

// ByLocations is one unit allocated from a SKU with LocationLots lots at each of Locations
// locations, routed ranked over all of them and unrouted: rates and Redis's time inside
// EVALSHA per call. RoutedOfSingle compares the routed time per call with the routed one
// at a single location, the baseline of the same run.
type ByLocations struct {
	Locations            int     `json:"locations"`
	RoutedOps            float64 `json:"routed_ops"`
	RoutedUsecPerCall    float64 `json:"routed_script_usec_per_call"`
	UnroutedOps          float64 `json:"unrouted_ops"`
	UnroutedUsecPerCall  float64 `json:"unrouted_script_usec_per_call"`
	RoutedOfSingleRouted float64 `json:"routed_of_single_location_routed"`
}

// RegistrationLots are the SKU sizes Options.Registration measures.
var RegistrationLots = []int{100, 1000}

// Report holds the rates in operations per second.
type Report struct {
	Lots              int                `json:"lots"`
	Junban            float64            `json:"junban_ops"`
	JSONDoc           float64            `json:"jsondoc_ops"`
	PGRowLock         float64            `json:"pg_rowlock_ops"`
	EvalshaCeiling    float64            `json:"evalsha_ceiling_ops"`
	Clients           int                `json:"clients"`
	DurationSeconds   float64            `json:"duration_s"`
	JunbanByLots      map[string]float64 `json:"junban_ops_by_lots,omitempty"`
	JunbanWorstByLots map[string]float64 `json:"junban_worst_ops_by_lots,omitempty"`
	// ByLocations has an entry per LocationCounts count when Options.Locations is set.
	ByLocations []ByLocations `json:"by_locations,omitempty"`
	// Profile is what Redis reported (INFO commandstats) per operation of each Redis variant.
	Profile map[string]Profile `json:"profile"`
	// JunbanBefore is the allocation script of the baseline revision (Options.Baseline;
	// BaselineDefault, before the warehouse operations), on a hash in its layout; JunbanHolder is today's with a holder, as the
	// order-worker calls it (Junban is today's without one).
	JunbanBefore float64 `json:"junban_before_ops"`
	JunbanHolder float64 `json:"junban_holder_ops"`
	Ratios       Ratios  `json:"ratios"`
	// Registration has one entry per RegistrationLots size when Options.Registration is set.
	Registration []Registration `json:"registration,omitempty"`
}

// Ratios compare the three junban figures with the EVALSHA ceiling and with junban_before.
type Ratios struct {
	BeforeOfCeiling float64 `json:"junban_before_of_ceiling"`
	JunbanOfCeiling float64 `json:"junban_of_ceiling"`
	HolderOfCeiling float64 `json:"junban_holder_of_ceiling"`
	JunbanOfBefore  float64 `json:"junban_of_before"`
	HolderOfBefore  float64 `json:"junban_holder_of_before"`
}

// Registration is ledger.RegisterLot (a fresh lot id each call) and an allocation with a
// holder on the same SKU of Lots lots: rates and Redis's time inside EVALSHA per call.
// Registrations grow the SKU; it is restored to Lots lots before every turn and whenever
// registrations grew it by a tenth (RegistrationGrowth), the restores not timed.
type Registration struct {
	Lots                int     `json:"lots"`
	RegisterOps         float64 `json:"register_ops"`
	RegisterUsecPerCall float64 `json:"register_script_usec_per_call"`
	AllocateOps         float64 `json:"alloc_ops"`
	AllocateUsecPerCall float64 `json:"alloc_script_usec_per_call"`
	MaxLotsDuringRun    int     `json:"max_lots"`
}

// Profile is Redis's own account of one variant: time inside EVALSHA per call and the
// commands the script ran per call (from INFO commandstats, diffed around the run).
type Profile struct {
	ScriptUsecPerCall float64            `json:"script_usec_per_call"`
	InnerCallsPerOp   map[string]float64 `json:"inner_calls_per_op"`
	InnerUsecPerOp    float64            `json:"inner_usec_per_op"`
}

//go:embed jsondoc.lua
var jsondocLua string

var (
	jsondocScript = redis.NewScript(jsondocLua)
	ceilingScript = redis.NewScript("return 1")
)

const (
	targetDate  = "2026-12-01"
	safetyStock = 10
	retention   = 10 * time.Minute
	lotStock    = 1_000_000_000
)

// hotSKU returns a SKU with n lots, each with plenty of stock. In the worst case the
// safety stock is all lots but one, so every ship allocation must read every lot's
// sellable to prove that the safety stock holds.
func hotSKU(name string, n int, worst bool) stock.SKU {
	s := stock.SKU{SKU: name, SafetyStock: safetyStock, Lots: []stock.Lot{}}
	if worst {
		s.SafetyStock = int64(n-1) * lotStock
	}
	for i := range n {
		l := stock.Lot{LotID: fmt.Sprintf("LOT-%04d", i), Kind: stock.KindOnHand, Good: true,
			BestBefore: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format("2006-01-02"),
			RegSeq:     int64(i), ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: lotStock}
		s.Lots = append(s.Lots, l)
	}
	return s
}

type loader map[string]stock.SKU

func (m loader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	s, ok := m[sku]
	if !ok {
		return s, stock.ErrUnknownSKU
	}
	return s, nil
}

// opFunc is one operation of a variant; n is unique within the run.
type opFunc func(ctx context.Context, n int64) error

// variant is one contender: setup prepares its data and returns its operation and
// teardown.
type variant struct {
	name  string
	setup func() (opFunc, func(), error)
	// sql marks the PostgreSQL variant: Redis's counters say nothing about it.
	sql bool
	// reset, when set, runs before each of the variant's turns, outside the measurement.
	reset func(ctx context.Context) error
	// paused, when set, is the time so far the variant's operations spent stopped for
	// work that is not measured; a turn's rate leaves it out.
	paused func() time.Duration
}

// drive runs op from clients goroutines for d and returns the rate of successful ops
// over the time not paused (paused may be nil).
func drive(ctx context.Context, clients int, d time.Duration, seq *atomic.Int64, op opFunc, paused func() time.Duration) (float64, error) {
	var paused0 time.Duration
	if paused != nil {
		paused0 = paused()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if err := op(ctx, seq.Add(1)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	elapsed := time.Since(start)
	if paused != nil {
		elapsed -= paused() - paused0
	}
	return float64(done.Load()) / elapsed.Seconds(), nil
}

// Run measures every variant. The variants take turns in opt.Rounds rounds of
// opt.Duration/opt.Rounds each, and each figure is the median of its rounds, so a burst
// of load from other processes on a shared machine hits one round of one variant, not a
// whole figure. rc must have a pool of at least opt.Clients connections; db may be nil to
// skip PostgreSQL.
func Run(ctx context.Context, rc redis.UniversalClient, db *gorm.DB, opt Options, log io.Writer) (Report, error) {
	if opt.Baseline == "" {
		return Report{}, errors.New("allocbench: no baseline script (Options.Baseline: ReadBaseline)")
	}
	rep := Report{Lots: opt.Lots, Clients: opt.Clients, DurationSeconds: opt.Duration.Seconds(), Profile: map[string]Profile{}}
	defer cleanup(context.WithoutCancel(ctx), rc, opt.Prefix+":*")
	if opt.Rounds < 1 {
		opt.Rounds = 1
	}
	main := []variant{
		{name: "evalsha_ceiling", setup: func() (opFunc, func(), error) { return setupCeiling(rc, opt) }},
		{name: fmt.Sprintf("junban_%d_lots", opt.Lots), setup: func() (opFunc, func(), error) { return setupJunban(ctx, rc, opt, opt.Lots, false, false) }},
		{name: fmt.Sprintf("junban_before_%d_lots", opt.Lots), setup: func() (opFunc, func(), error) { return setupJunbanBefore(ctx, rc, opt) }},
		{name: fmt.Sprintf("junban_holder_%d_lots", opt.Lots), setup: func() (opFunc, func(), error) { return setupJunban(ctx, rc, opt, opt.Lots, false, true) }},
		{name: fmt.Sprintf("jsondoc_%d_lots", opt.Lots), setup: func() (opFunc, func(), error) { return setupJSONDoc(ctx, rc, opt) }},
	}
	if db != nil {
		main = append(main, variant{name: fmt.Sprintf("pg_rowlock_%d_lots", opt.Lots), setup: func() (opFunc, func(), error) { return setupPG(ctx, db, opt) }, sql: true})
	}
	rates, err := runRounds(ctx, rc, opt, main, rep.Profile, log)
	if err != nil {
		return rep, err
	}
	rep.EvalshaCeiling, rep.Junban, rep.JunbanBefore, rep.JunbanHolder, rep.JSONDoc = rates[0], rates[1], rates[2], rates[3], rates[4]
	if db != nil {
		rep.PGRowLock = rates[5]
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	rep.Ratios = Ratios{
		BeforeOfCeiling: ratio(rep.JunbanBefore, rep.EvalshaCeiling),
		JunbanOfCeiling: ratio(rep.Junban, rep.EvalshaCeiling),
		HolderOfCeiling: ratio(rep.JunbanHolder, rep.EvalshaCeiling),
		JunbanOfBefore:  ratio(rep.Junban, rep.JunbanBefore),
		HolderOfBefore:  ratio(rep.JunbanHolder, rep.JunbanBefore),
	}
	if opt.Registration {
		if err := runRegistration(ctx, rc, opt, &rep, log); err != nil {
			return rep, err
		}
	}
	if opt.Sweep {
		rep.JunbanByLots, rep.JunbanWorstByLots = map[string]float64{}, map[string]float64{}
		var sweep []variant
		ns := []int{1, 10, 100, 1000}
		for _, worst := range []bool{false, true} {
			for _, n := range ns {
				name := fmt.Sprintf("junban_%d_lots", n)
				if worst {
					name = fmt.Sprintf("junban_worst_%d_lots", n)
				}
				sweep = append(sweep, variant{name: name, setup: func() (opFunc, func(), error) { return setupJunban(ctx, rc, opt, n, worst, false) }})
			}
		}
		rates, err := runRounds(ctx, rc, opt, sweep, rep.Profile, log)
		if err != nil {
			return rep, err
		}
		for i, n := range ns {
			rep.JunbanByLots[strconv.Itoa(n)] = rates[i]
			rep.JunbanWorstByLots[strconv.Itoa(n)] = rates[len(ns)+i]
		}
	}
	if opt.Locations {
		if err := runLocations(ctx, rc, opt, &rep, log); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// runLocations measures a routed and an unrouted allocation at each LocationCounts count.
func runLocations(ctx context.Context, rc redis.UniversalClient, opt Options, rep *Report, log io.Writer) error {
	var vs []variant
	for _, n := range LocationCounts {
		for _, routed := range []bool{true, false} {
			vs = append(vs, variant{name: locVariant(n, routed), setup: func() (opFunc, func(), error) { return setupLocations(ctx, rc, opt, n, routed) }})
		}
	}
	rates, err := runRounds(ctx, rc, opt, vs, rep.Profile, log)
	if err != nil {
		return err
	}
	for i, n := range LocationCounts {
		b := ByLocations{Locations: n, RoutedOps: rates[2*i], UnroutedOps: rates[2*i+1],
			RoutedUsecPerCall:   rep.Profile[locVariant(n, true)].ScriptUsecPerCall,
			UnroutedUsecPerCall: rep.Profile[locVariant(n, false)].ScriptUsecPerCall}
		if single := rep.Profile[locVariant(LocationCounts[0], true)].ScriptUsecPerCall; single > 0 {
			b.RoutedOfSingleRouted = b.RoutedUsecPerCall / single
		}
		rep.ByLocations = append(rep.ByLocations, b)
	}
	return nil
}

func locVariant(n int, routed bool) string {
	if routed {
		return fmt.Sprintf("junban_routed_%d_locations", n)
	}
	return fmt.Sprintf("junban_unrouted_%d_locations", n)
}

// setupLocations allocates one unit from a SKU with LocationLots lots at each of n
// locations, their best-befores interleaved over the locations, routed ranked over all of
// them or unrouted.
func setupLocations(ctx context.Context, rc redis.UniversalClient, opt Options, n int, routed bool) (opFunc, func(), error) {
	sku := fmt.Sprintf("LOC-%d-%v", n, routed)
	s := stock.SKU{SKU: sku, SafetyStock: safetyStock, Lots: []stock.Lot{}}
	var locs []stock.Location
	for j := range n {
		id := fmt.Sprintf("loc-%02d", j)
		locs = append(locs, stock.Location{ID: id, Kind: stock.LocationWarehouse, Rank: j, Ships: true, Enabled: true})
		for i := range LocationLots {
			s.Lots = append(s.Lots, stock.Lot{LotID: fmt.Sprintf("LOT-%02d-%02d", j, i), Kind: stock.KindOnHand, Good: true,
				BestBefore: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, (i+j)%28).Format("2006-01-02"),
				RegSeq:     int64(j*LocationLots + i), ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: lotStock, Location: id})
		}
	}
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: opt.Prefix, Loader: loader{sku: s}, OpRetention: retention})
	if err != nil {
		return nil, nil, err
	}
	if err := l.Load(ctx, sku); err != nil {
		return nil, nil, err
	}
	var route *stock.Route
	if routed {
		route = &stock.Route{Strategies: []stock.Strategy{stock.StrategyRanked}, Locations: locs}
	}
	return func(ctx context.Context, n int64) error {
		_, err := l.Apply(ctx, stock.AllocateRequest{OpID: "op-" + strconv.FormatInt(n, 10), SKU: sku, Qty: 1, TargetDate: targetDate,
			Mode: stock.ModeShip, Route: route})
		return err
	}, func() {}, nil
}

// runRounds sets the variants up, runs them in turns and returns each one's median rate;
// it adds each variant's Redis profile (summed over its rounds) to profiles.
func runRounds(ctx context.Context, rc redis.UniversalClient, opt Options, vs []variant, profiles map[string]Profile, log io.Writer) ([]float64, error) {
	ops := make([]opFunc, len(vs))
	for i, v := range vs {
		op, teardown, err := v.setup()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
		defer teardown()
		ops[i] = op
	}
	samples := make([][]float64, len(vs))
	seqs := make([]atomic.Int64, len(vs))
	type acc struct{ before, after map[string]stat }
	stats := make([][]acc, len(vs))
	for r := range opt.Rounds {
		for i, v := range vs {
			if v.reset != nil {
				if err := v.reset(ctx); err != nil {
					return nil, fmt.Errorf("%s: %w", v.name, err)
				}
			}
			before, _ := commandStats(ctx, rc)
			rate, err := drive(ctx, opt.Clients, opt.Duration/time.Duration(opt.Rounds), &seqs[i], ops[i], v.paused)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.name, err)
			}
			after, _ := commandStats(ctx, rc)
			stats[i] = append(stats[i], acc{before, after})
			samples[i] = append(samples[i], rate)
			fmt.Fprintf(log, "bench alloc: round %d/%d %-24s %10.0f ops/s\n", r+1, opt.Rounds, v.name, rate)
			// Op records are not part of what is measured: drop them between turns.
			cleanup(ctx, rc, opt.Prefix+":*:op:*")
		}
	}
	out := make([]float64, len(vs))
	for i, v := range vs {
		sort.Float64s(samples[i])
		out[i] = samples[i][len(samples[i])/2]
		sum := func(pick func(acc) map[string]stat) map[string]stat {
			m := map[string]stat{}
			for _, a := range stats[i] {
				for k, st := range pick(a) {
					m[k] = stat{m[k].calls + st.calls, m[k].usec + st.usec}
				}
			}
			return m
		}
		if v.sql {
			continue
		}
		// Sum of (after - before) over rounds = sum(after) - sum(before).
		if p, ok := profileOf(sum(func(a acc) map[string]stat { return a.before }), sum(func(a acc) map[string]stat { return a.after })); ok {
			profiles[v.name] = p
		}
	}
	return out, nil
}

func setupCeiling(rc redis.UniversalClient, opt Options) (opFunc, func(), error) {
	key := opt.Prefix + ":ceiling:{x}"
	return func(ctx context.Context, _ int64) error {
		return ceilingScript.Run(ctx, rc, []string{key}).Err()
	}, func() {}, nil
}

// setupJunban allocates with ledger.Allocate; with holder, each allocation names an order
// of its own, as the order-worker does, so the SKU's holder hash gains an entry per call.
func setupJunban(ctx context.Context, rc redis.UniversalClient, opt Options, lots int, worst, holder bool) (opFunc, func(), error) {
	sku := fmt.Sprintf("HOT-%d-%v-%v", lots, worst, holder)
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: opt.Prefix, Loader: loader{sku: hotSKU(sku, lots, worst)}, OpRetention: retention})
	if err != nil {
		return nil, nil, err
	}
	if err := l.Load(ctx, sku); err != nil {
		return nil, nil, err
	}
	return allocOp(l, sku, holder), func() {}, nil
}

func allocOp(l *ledger.Ledger, sku string, holder bool) opFunc {
	return func(ctx context.Context, n int64) error {
		id := strconv.FormatInt(n, 10)
		r := stock.AllocateRequest{OpID: "op-" + id, SKU: sku, Qty: 1, TargetDate: targetDate, Mode: stock.ModeShip}
		if holder {
			r.Holder = "lc-" + id
		}
		_, err := l.Apply(ctx, r)
		return err
	}
}

// setupJunbanBefore runs the baseline's allocation script (BaselineDefault's, or one that
// takes the same layout) on a hash in its layout:
// the hash today's Load writes, less the next-registration field and with four bucket
// numbers per lot. The old script fails on a five-number bucket field, so a layout this
// missed stops the run instead of measuring something else.
func setupJunbanBefore(ctx context.Context, rc redis.UniversalClient, opt Options) (opFunc, func(), error) {
	sku := fmt.Sprintf("HOT-BEFORE-%d", opt.Lots)
	s := hotSKU(sku, opt.Lots, false)
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: opt.Prefix, Loader: loader{sku: s}})
	if err != nil {
		return nil, nil, err
	}
	if err := l.Load(ctx, sku); err != nil {
		return nil, nil, err
	}
	key := ledger.Key(opt.Prefix, sku)
	old := make([]any, 0, 2*len(s.Lots))
	for _, l := range s.Lots {
		old = append(old, "b:"+l.LotID, "0 0 0 0")
	}
	if err := rc.HSet(ctx, key, old...).Err(); err != nil {
		return nil, nil, err
	}
	if err := rc.HDel(ctx, key, "n").Err(); err != nil {
		return nil, nil, err
	}
	ttl := strconv.Itoa(int(retention.Seconds()))
	script := redis.NewScript(opt.Baseline)
	return func(ctx context.Context, n int64) error {
		return script.Run(ctx, rc, []string{key, key + ":op:op-" + strconv.FormatInt(n, 10)},
			"alloc", ttl, 1, targetDate, "ship").Err()
	}, func() {}, nil
}

// RegistrationGrowth bounds how far registrations grow a SKU of the registration rounds:
// by at most a tenth of its lots before it is restored.
const RegistrationGrowth = 10

// runRegistration times RegisterLot and an allocation with a holder on SKUs of each of
// RegistrationLots sizes, in turns, and adds the figures to rep.
func runRegistration(ctx context.Context, rc redis.UniversalClient, opt Options, rep *Report, log io.Writer) error {
	var vs []variant
	for _, n := range RegistrationLots {
		sku := fmt.Sprintf("REG-%d", n)
		l, err := ledger.New(ledger.Config{Redis: rc, Prefix: opt.Prefix, Loader: loader{sku: hotSKU(sku, n, false)}, OpRetention: retention})
		if err != nil {
			return err
		}
		snap := &skuSnapshot{rc: rc, key: ledger.Key(opt.Prefix, sku)}
		setup := func() error {
			if snap.dump != "" {
				return nil
			}
			if err := l.Load(ctx, sku); err != nil {
				return err
			}
			return snap.take(ctx)
		}
		g := &growthGate{budget: int64(max(1, n/RegistrationGrowth)), restore: snap.restore}
		vs = append(vs,
			variant{name: fmt.Sprintf("register_lot_%d_lots", n), reset: g.reset, paused: g.pausedTime,
				setup: func() (opFunc, func(), error) {
					if err := setup(); err != nil {
						return nil, nil, err
					}
					return registerOp(l, sku, n, g), func() {}, nil
				}},
			variant{name: fmt.Sprintf("alloc_beside_register_%d_lots", n), reset: g.reset,
				setup: func() (opFunc, func(), error) {
					if err := setup(); err != nil {
						return nil, nil, err
					}
					return allocOp(l, sku, true), func() {}, nil
				}})
	}
	rates, err := runRounds(ctx, rc, opt, vs, rep.Profile, log)
	if err != nil {
		return err
	}
	for i, n := range RegistrationLots {
		reg, alloc := vs[2*i].name, vs[2*i+1].name
		rep.Registration = append(rep.Registration, Registration{Lots: n,
			RegisterOps: rates[2*i], RegisterUsecPerCall: rep.Profile[reg].ScriptUsecPerCall,
			AllocateOps: rates[2*i+1], AllocateUsecPerCall: rep.Profile[alloc].ScriptUsecPerCall,
			MaxLotsDuringRun: n + max(1, n/RegistrationGrowth)})
	}
	return nil
}

// registerOp registers a fresh on-hand lot per call, best-before after every lot of the
// SKU (a new receipt is the freshest), through g.
func registerOp(l *ledger.Ledger, sku string, lots int, g *growthGate) opFunc {
	bb := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, lots+1).Format("2006-01-02")
	return func(ctx context.Context, n int64) error {
		id := strconv.FormatInt(n, 10)
		return g.do(ctx, func() error {
			_, err := l.Apply(ctx, stock.RegisterLotRequest{OpID: "reg-" + id, SKU: sku,
				Lot: stock.NewLot{LotID: "NEW-" + id, Kind: stock.KindOnHand, Good: true, BestBefore: bb, Sellable: lotStock}})
			return err
		})
	}
}

// skuSnapshot restores a SKU hash as it was loaded (DUMP once, RESTORE ... REPLACE), in
// one command that is not an EVALSHA, so Redis's script counters stay the operations'.
type skuSnapshot struct {
	rc   redis.UniversalClient
	key  string
	dump string
}

func (s *skuSnapshot) take(ctx context.Context) error {
	d, err := s.rc.Dump(ctx, s.key).Result()
	s.dump = d
	return err
}

func (s *skuSnapshot) restore(ctx context.Context) error {
	return s.rc.RestoreReplace(ctx, s.key, 0, s.dump).Err()
}

// growthGate lets at most budget operations through between two restores: the operation
// that finds the budget spent waits for the ones in flight, restores, and goes on. The
// time spent restoring is paused time.
type growthGate struct {
	mu      sync.RWMutex
	budget  int64
	used    atomic.Int64
	paused  atomic.Int64 // nanoseconds
	restore func(ctx context.Context) error
}

func (g *growthGate) do(ctx context.Context, op func() error) error {
	for {
		g.mu.RLock()
		if g.used.Add(1) <= g.budget {
			err := op()
			g.mu.RUnlock()
			return err
		}
		g.mu.RUnlock()
		g.mu.Lock()
		// Of the callers that found the budget spent, the first restores; the others find
		// it restored.
		if g.used.Load() > g.budget {
			start := time.Now()
			if err := g.restore(ctx); err != nil {
				g.mu.Unlock()
				return err
			}
			g.used.Store(0)
			g.paused.Add(int64(time.Since(start)))
		}
		g.mu.Unlock()
	}
}

// reset restores the SKU before a turn, so every turn starts from the loaded lots.
func (g *growthGate) reset(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used.Store(0)
	return g.restore(ctx)
}

func (g *growthGate) pausedTime() time.Duration { return time.Duration(g.paused.Load()) }

type docLot struct {
	ID   string `json:"id"`
	Good bool   `json:"good"`
	VF   string `json:"vf"`
	VT   string `json:"vt"`
	BB   string `json:"bb"`
	Kind string `json:"kind"`
	Reg  int64  `json:"reg"`
	S    int64  `json:"s"`
	R    int64  `json:"r"`
	A    int64  `json:"a"`
	H    int64  `json:"h"`
	X    int64  `json:"x"`
}

func setupJSONDoc(ctx context.Context, rc redis.UniversalClient, opt Options) (opFunc, func(), error) {
	s := hotSKU("HOT-JSON", opt.Lots, false)
	doc := struct {
		V    int64    `json:"v"`
		SS   int64    `json:"ss"`
		Lots []docLot `json:"lots"`
	}{SS: s.SafetyStock}
	for _, l := range s.Lots { // hotSKU's lots are in FEFO order already
		doc.Lots = append(doc.Lots, docLot{ID: l.LotID, Good: l.Good, VF: l.ValidFrom, VT: l.ValidTo, BB: l.BestBefore,
			Kind: l.Kind, Reg: l.RegSeq, S: l.Sellable})
	}
	b, _ := json.Marshal(doc)
	key := ledger.Key(opt.Prefix+":jsondoc", s.SKU)
	if err := rc.Set(ctx, key, b, 0).Err(); err != nil {
		return nil, nil, err
	}
	ttl := strconv.Itoa(int(retention.Seconds()))
	return func(ctx context.Context, n int64) error {
		return jsondocScript.Run(ctx, rc, []string{key, key + ":op:op-" + strconv.FormatInt(n, 10)},
			1, targetDate, "ship", ttl).Err()
	}, func() {}, nil
}

func setupPG(ctx context.Context, gdb *gorm.DB, opt Options) (op opFunc, teardown func(), err error) {
	db, err := gdb.DB()
	if err != nil {
		return nil, nil, err
	}
	conns := opt.PGConns
	if conns <= 0 {
		conns = opt.Clients
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	// Open the pool up front: a server that refuses connections (max_connections) fails
	// the run here, with advice, instead of in the middle of a measurement.
	held := make([]*sql.Conn, 0, conns)
	for range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			for _, c := range held {
				c.Close()
			}
			return nil, nil, fmt.Errorf("opening %d PostgreSQL connections (lower --pg-conns): %w", conns, err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Close()
	}
	schema := "bench_alloc_" + strings.NewReplacer(":", "_", "-", "_").Replace(strings.ToLower(opt.Prefix))
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		return nil, nil, err
	}
	teardown = func() { db.ExecContext(context.WithoutCancel(ctx), `DROP SCHEMA `+schema+` CASCADE`) }
	defer func() {
		if err != nil {
			teardown()
		}
	}()
	for _, q := range []string{
		`CREATE TABLE ` + schema + `.skus (sku text PRIMARY KEY, safety_stock bigint NOT NULL, version bigint NOT NULL)`,
		`CREATE TABLE ` + schema + `.lots (sku text NOT NULL, lot_id text NOT NULL, kind text NOT NULL, good boolean NOT NULL,
			best_before date, reg_seq bigint NOT NULL, valid_from date NOT NULL, valid_to date NOT NULL,
			sellable bigint NOT NULL, reserved bigint NOT NULL DEFAULT 0, allocated bigint NOT NULL DEFAULT 0,
			PRIMARY KEY (sku, lot_id))`,
		`CREATE TABLE ` + schema + `.ops (op_id text PRIMARY KEY, result text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, nil, err
		}
	}
	s := hotSKU("HOT-PG", opt.Lots, false)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+schema+`.skus VALUES ($1, $2, 0)`, s.SKU, s.SafetyStock); err != nil {
		return nil, nil, err
	}
	for _, l := range s.Lots {
		if _, err := db.ExecContext(ctx, `INSERT INTO `+schema+`.lots (sku, lot_id, kind, good, best_before, reg_seq, valid_from, valid_to, sellable)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, s.SKU, l.LotID, l.Kind, l.Good, l.BestBefore, l.RegSeq, l.ValidFrom, l.ValidTo, l.Sellable); err != nil {
			return nil, nil, err
		}
	}
	selectOp := `SELECT result FROM ` + schema + `.ops WHERE op_id = $1`
	// The same candidates and order as the script: good lots valid on the date, on-hand
	// by best-before then registration, then planned newest first; locked for the update.
	selectLots := `SELECT lot_id, sellable FROM ` + schema + `.lots
		WHERE sku = $1 AND good AND valid_from <= $2::date AND $2::date <= valid_to
		ORDER BY kind = 'planned', CASE WHEN kind = 'onhand' THEN best_before END NULLS LAST,
		         CASE WHEN kind = 'onhand' THEN reg_seq ELSE -reg_seq END
		FOR UPDATE`
	updLot := `UPDATE ` + schema + `.lots SET sellable = sellable - $3, allocated = allocated + $3 WHERE sku = $1 AND lot_id = $2`
	updSKU := `UPDATE ` + schema + `.skus SET version = version + 1 WHERE sku = $1 RETURNING version, safety_stock`
	insOp := `INSERT INTO ` + schema + `.ops (op_id, result) VALUES ($1, $2)`
	const qty = 1
	return func(ctx context.Context, n int64) error {
		opID := "op-" + strconv.FormatInt(n, 10)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var prev string
		switch err := tx.QueryRowContext(ctx, selectOp, opID).Scan(&prev); {
		case err == nil:
			return tx.Commit()
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		rows, err := tx.QueryContext(ctx, selectLots, s.SKU, targetDate)
		if err != nil {
			return err
		}
		type cand struct {
			id   string
			sell int64
		}
		var cands []cand
		var sum int64
		for rows.Next() {
			var c cand
			if err := rows.Scan(&c.id, &c.sell); err != nil {
				rows.Close()
				return err
			}
			cands = append(cands, c)
			sum += c.sell
		}
		rows.Close()
		if sum < qty || sum < safetyStock+qty {
			return fmt.Errorf("unexpected shortage: %d", sum)
		}
		var res strings.Builder
		rem := int64(qty)
		for _, c := range cands {
			if rem == 0 {
				break
			}
			if c.sell > 0 {
				t := min(c.sell, rem)
				if _, err := tx.ExecContext(ctx, updLot, s.SKU, c.id, t); err != nil {
					return err
				}
				fmt.Fprintf(&res, "%s sellable allocated %d\n", c.id, t)
				rem -= t
			}
		}
		var v, ss int64
		if err := tx.QueryRowContext(ctx, updSKU, s.SKU).Scan(&v, &ss); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, insOp, opID, strconv.FormatInt(v, 10)+"\n"+res.String()); err != nil {
			return err
		}
		return tx.Commit()
	}, teardown, nil
}

// cleanup deletes the keys that match pattern.
func cleanup(ctx context.Context, rc redis.UniversalClient, pattern string) {
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 5000).Iterator()
		var batch []string
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				c.Unlink(ctx, batch...)
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			c.Unlink(ctx, batch...)
		}
		return iter.Err()
	}
	if cc, ok := rc.(*redis.ClusterClient); ok {
		cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
		return
	}
	del(ctx, rc)
}

type stat struct{ calls, usec float64 }

// commandStats reads INFO commandstats (of the first master on a cluster).
func commandStats(ctx context.Context, rc redis.UniversalClient) (map[string]stat, error) {
	var info string
	var err error
	if cc, ok := rc.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			s, err := c.Info(ctx, "commandstats").Result()
			info += s
			return err
		})
	} else {
		info, err = rc.Info(ctx, "commandstats").Result()
	}
	if err != nil {
		return nil, err
	}
	out := map[string]stat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st stat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.calls += f
			case "usec":
				st.usec += f
			}
		}
		s := out[strings.TrimPrefix(name, "cmdstat_")]
		out[strings.TrimPrefix(name, "cmdstat_")] = stat{s.calls + st.calls, s.usec + st.usec}
	}
	return out, nil
}

// profileOf diffs two commandstats readings: script time per EVALSHA call and the
// commands run inside scripts per call (every command but the script calls themselves
// and the INFO/SCAN of the harness).
func profileOf(before, after map[string]stat) (Profile, bool) {
	if before == nil || after == nil {
		return Profile{}, false
	}
	d := func(name string) stat {
		return stat{after[name].calls - before[name].calls, after[name].usec - before[name].usec}
	}
	ev := d("evalsha")
	if ev.calls == 0 {
		return Profile{}, false
	}
	p := Profile{ScriptUsecPerCall: ev.usec / ev.calls, InnerCallsPerOp: map[string]float64{}}
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch n {
		case "evalsha", "eval", "info", "scan", "unlink", "script|load", "script", "ping", "hello", "client|setinfo":
			continue
		}
		// On a shared server other clients' commands show up too, at a small fraction
		// per call; a script's own commands run about once per call or more.
		if s := d(n); s.calls/ev.calls >= 0.5 {
			p.InnerCallsPerOp[n] = math.Round(100*s.calls/ev.calls) / 100
			p.InnerUsecPerOp += s.usec / ev.calls
		}
	}
	return p, true
}
