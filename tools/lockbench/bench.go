// Package lockbench measures lockhandoff against redsync (`junbanlab bench lock`): a hot
// entity with 16 closed-loop producers, and 16 producers spread over 1,000 entities.
package lockbench

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/lockhandoff"
)

// Defaults of Options.
const (
	DurationDefault  = 5 * time.Second
	ProducersDefault = 16
	KeysDefault      = 1000
	// RedsyncTunedDelay is redsync's retry delay at its best throughput under contention.
	RedsyncTunedDelay = time.Millisecond
)

// Options configure a run.
type Options struct {
	// Duration is the length of each measurement (the drain-alone one queues Duration x
	// 4,000 events instead).
	Duration time.Duration
	// Producers is the number of closed-loop producers of each measurement.
	Producers int
	// Keys is the number of entities of the spread measurements.
	Keys int
	// Detached is lockhandoff.Config.Detached of the handoff measurements (the spread one
	// also measures 0 beside it).
	Detached int
	// Prefix starts every key of the run; it must be unique to the run (all its keys are
	// deleted at the end).
	Prefix string
	// Progress receives one line per finished measurement; nil is quiet.
	Progress io.Writer
}

// Result is what `junbanlab bench lock --json` prints.
type Result struct {
	Hot    Hot    `json:"hot"`
	Spread Spread `json:"spread"`
}

// Hot compares the three contenders on one entity.
type Hot struct {
	HandoffEPS             float64 `json:"handoff_eps"`
	RedsyncTunedEPS        float64 `json:"redsync_tuned_eps"`
	RedsyncDefaultEPS      float64 `json:"redsync_default_eps"`
	HandoffP99Ms           float64 `json:"handoff_p99_ms"`
	RedsyncTunedP99Ms      float64 `json:"redsync_tuned_p99_ms"`
	HandoffMaxMs           float64 `json:"handoff_max_ms"`
	RedsyncDefaultMaxMs    float64 `json:"redsync_default_max_ms"`
	HandoffFairness        float64 `json:"handoff_fairness"`
	RedsyncDefaultFairness float64 `json:"redsync_default_fairness"`
	// HandoffOwnWriteEPS and HandoffOwnWriteP99Ms are handoff with the handler making its
	// write (the trim) itself, in a round trip of its own before the handoff's, instead of
	// committing it with the step (lockhandoff.Trim). Not targets: they show what
	// a returned Trim saves.
	HandoffOwnWriteEPS   float64 `json:"handoff_own_write_eps"`
	HandoffOwnWriteP99Ms float64 `json:"handoff_own_write_p99_ms"`
	// HandoffDrainEPS is the drain loop alone: one turn works through a wait list filled
	// in advance, the handler committing the same trim, with no producer running. Producers
	// only add work to Redis and the cores, so it is about the ceiling of HandoffEPS on
	// this machine in this run (within the noise of a short run). Not a target.
	HandoffDrainEPS float64 `json:"handoff_drain_eps"`
}

// Spread compares handoff with no lock at all over many entities.
type Spread struct {
	HandoffEPS  float64 `json:"handoff_eps"`
	UnlockedEPS float64 `json:"unlocked_eps"`
	// HandoffInlineEPS is handoff with every turn drained inline (Config.Detached 0): a
	// Submit that took a turn returns only after the turn's release, a third round trip
	// on the producer's path. Not a target: it shows what Detached saves.
	HandoffInlineEPS float64 `json:"handoff_inline_eps"`
}

// Measurement is one contender's figures.
type Measurement struct {
	Name     string
	Events   int
	EPS      float64
	P50Ms    float64 // submit to handler start
	P99Ms    float64
	MaxMs    float64
	Fairness float64 // Jain's index over the producers' completed counts
}

func (m Measurement) String() string {
	if m.P99Ms == 0 && m.MaxMs == 0 {
		return fmt.Sprintf("%-22s %8d events %10.0f ev/s", m.Name, m.Events, m.EPS)
	}
	return fmt.Sprintf("%-22s %8d events %10.0f ev/s  p50 %7.2f ms  p99 %7.2f ms  max %8.2f ms  fairness %.3f",
		m.Name, m.Events, m.EPS, m.P50Ms, m.P99Ms, m.MaxMs, m.Fairness)
}

// Run makes the eight measurements on rc: the five hot ones one after the other, then the
// three spread ones in alternating slices.
func Run(ctx context.Context, rc redis.UniversalClient, o Options) (Result, []Measurement, error) {
	if o.Duration <= 0 {
		o.Duration = DurationDefault
	}
	if o.Producers <= 0 {
		o.Producers = ProducersDefault
	}
	if o.Keys <= 0 {
		o.Keys = KeysDefault
	}
	if o.Prefix == "" {
		return Result{}, nil, errors.New("bench: empty prefix")
	}
	defer cleanup(context.WithoutCancel(ctx), rc, o.Prefix)

	steps := []struct {
		label string // pprof label "measurement" of the step's goroutines
		run   func(context.Context, redis.UniversalClient, Options) (Measurement, error)
	}{
		{"hot", func(ctx context.Context, rc redis.UniversalClient, o Options) (Measurement, error) {
			return hotHandoff(ctx, rc, o, true)
		}},
		{"redsync-tuned", func(ctx context.Context, rc redis.UniversalClient, o Options) (Measurement, error) {
			return hotRedsync(ctx, rc, o, "hot redsync 1ms", redsync.WithRetryDelay(RedsyncTunedDelay))
		}},
		{"redsync-default", func(ctx context.Context, rc redis.UniversalClient, o Options) (Measurement, error) {
			return hotRedsync(ctx, rc, o, "hot redsync default")
		}},
		{"hot-own-write", func(ctx context.Context, rc redis.UniversalClient, o Options) (Measurement, error) {
			return hotHandoff(ctx, rc, o, false)
		}},
		{"drain", hotDrain},
	}
	var ms []Measurement
	for _, step := range steps {
		var m Measurement
		var err error
		pprof.Do(ctx, pprof.Labels("measurement", step.label), func(ctx context.Context) { m, err = step.run(ctx, rc, o) })
		if err != nil {
			return Result{}, ms, err
		}
		if o.Progress != nil {
			fmt.Fprintln(o.Progress, m)
		}
		ms = append(ms, m)
		if err := ctx.Err(); err != nil {
			return Result{}, ms, err
		}
	}
	var hm, im, um Measurement
	var err error
	pprof.Do(ctx, pprof.Labels("measurement", "spread"), func(ctx context.Context) { hm, im, um, err = spreadRun(ctx, rc, o) })
	if err != nil {
		return Result{}, ms, err
	}
	for _, m := range []Measurement{hm, im, um} {
		if o.Progress != nil {
			fmt.Fprintln(o.Progress, m)
		}
		ms = append(ms, m)
	}
	return Result{
		Hot: Hot{
			HandoffEPS: ms[0].EPS, RedsyncTunedEPS: ms[1].EPS, RedsyncDefaultEPS: ms[2].EPS,
			HandoffP99Ms: ms[0].P99Ms, RedsyncTunedP99Ms: ms[1].P99Ms,
			HandoffMaxMs: ms[0].MaxMs, RedsyncDefaultMaxMs: ms[2].MaxMs,
			HandoffFairness: ms[0].Fairness, RedsyncDefaultFairness: ms[2].Fairness,
			HandoffOwnWriteEPS: ms[3].EPS, HandoffOwnWriteP99Ms: ms[3].P99Ms, HandoffDrainEPS: ms[4].EPS,
		},
		Spread: Spread{HandoffEPS: ms[5].EPS, UnlockedEPS: ms[7].EPS, HandoffInlineEPS: ms[6].EPS},
	}, ms, nil
}

// producerStats collects one producer's figures; only its producer writes counts, only
// the handler of its events writes latencies (one at a time: the producer is closed-loop).
type producerStats struct {
	mu        sync.Mutex
	latencies []time.Duration
	done      int
}

func (p *producerStats) add(lat time.Duration) {
	p.mu.Lock()
	p.latencies = append(p.latencies, lat)
	p.mu.Unlock()
}

func summarize(name string, ps []*producerStats, elapsed time.Duration) Measurement {
	var lats []time.Duration
	counts := make([]float64, len(ps))
	total := 0
	for i, p := range ps {
		p.mu.Lock()
		lats = append(lats, p.latencies...)
		counts[i] = float64(p.done)
		total += p.done
		p.mu.Unlock()
	}
	slices.Sort(lats)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	m := Measurement{Name: name, Events: total, EPS: float64(total) / elapsed.Seconds(), Fairness: jain(counts)}
	if len(lats) > 0 {
		m.P50Ms = ms(lats[(len(lats)-1)/2])
		m.P99Ms = ms(lats[int(math.Ceil(0.99*float64(len(lats))))-1])
		m.MaxMs = ms(lats[len(lats)-1])
	}
	return m
}

// jain is Jain's fairness index: (sum x)^2 / (n * sum x^2); 1.0 is perfectly even.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// background tracks a measurement's goroutines (Submits that run a drain, Resumes after a
// nudge) and keeps the errors they return.
type background struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// run runs f in a tracked goroutine.
func (b *background) run(f func() error) {
	b.wg.Go(func() {
		if err := f(); err != nil {
			b.mu.Lock()
			b.errs = append(b.errs, err)
			b.mu.Unlock()
		}
	})
}

// fail keeps err.
func (b *background) fail(err error) {
	b.mu.Lock()
	b.errs = append(b.errs, err)
	b.mu.Unlock()
}

// err returns the errors kept so far.
func (b *background) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return errors.Join(b.errs...)
}

// wait waits for every tracked goroutine and returns their errors.
func (b *background) wait() error {
	b.wg.Wait()
	return b.err()
}

// nudge is a lockhandoff.Config.Nudge that resumes the entity's backlog with *h in a
// tracked goroutine, as the replica that receives the drain message would.
func (b *background) nudge(ctx context.Context, h **lockhandoff.Handoff) func(context.Context, string) error {
	return func(_ context.Context, entity string) error {
		b.run(func() error { return (*h).Resume(context.WithoutCancel(ctx), entity) })
		return nil
	}
}

// hotHandoff: producers submit to one entity; each waits until the handler of its event
// ran, its write included, before it submits the next. Submit runs in a goroutine of its
// own, as in a consumer pool, so that the producer whose Submit took the turn (and drains
// the others' events) is not held up by that drain. (A pool of long-lived slots fed by a
// channel was tried: 5-15 % slower, one more goroutine wake-up per event.) The handler's
// write drops one element of the entity's list (filled before the run, as the order
// processor's outbox is before its trim). With commit the handler commits the trim with the
// turn's next step (lockhandoff.Trim), and its producer hears of the event when the
// trim is committed; without, the handler trims itself, a round trip before the
// handoff's.
func hotHandoff(ctx context.Context, rc redis.UniversalClient, o Options, commit bool) (Measurement, error) {
	entity := "hot"
	if !commit {
		entity = "hot-own-write"
	}
	listKey := lockhandoff.Key(o.Prefix, entity, "list")
	filled := hotListLen(o)
	if err := fillList(ctx, rc, listKey, filled); err != nil {
		return Measurement{}, fmt.Errorf("bench: hot handoff: %w", err)
	}
	base := time.Now()
	ps := make([]*producerStats, o.Producers)
	done := make([]chan struct{}, o.Producers)
	for i := range ps {
		ps[i], done[i] = &producerStats{}, make(chan struct{}, 1)
	}
	var bg background
	var h *lockhandoff.Handoff
	h, err := lockhandoff.New(lockhandoff.Config{
		Redis:  rc,
		Prefix: o.Prefix + ":handoff", Detached: o.Detached, Nudge: bg.nudge(ctx, &h), NeverQuarantine: true,
		Handler: lockhandoff.StepFunc(func(hctx context.Context, t lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
			p := binary.BigEndian.Uint32(env)
			sent := time.Duration(binary.BigEndian.Uint64(env[4:]))
			ps[p].add(time.Since(base) - sent)
			if commit {
				trim, err := t.Trim(listKey, 1)
				if err != nil {
					done[p] <- struct{}{}
				}
				return lockhandoff.Result{Trims: []lockhandoff.Trim{trim}}, err
			}
			err := rc.LTrim(hctx, listKey, 1, -1).Err()
			done[p] <- struct{}{}
			return lockhandoff.Result{}, err
		}),
		// The producer hears of its event once the trim was written with the step.
		Hooks: lockhandoff.Hooks{AfterTrims: func(_ string, env []byte, err error) {
			if err != nil {
				bg.fail(fmt.Errorf("committed trim: %w", err))
			}
			done[binary.BigEndian.Uint32(env)] <- struct{}{}
		}},
	})
	if err != nil {
		return Measurement{}, err
	}
	end := time.Now().Add(o.Duration)
	var wg sync.WaitGroup
	for p := range o.Producers {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				env := make([]byte, 12)
				binary.BigEndian.PutUint32(env, uint32(p))
				binary.BigEndian.PutUint64(env[4:], uint64(time.Since(base)))
				bg.run(func() error {
					_, err := h.Submit(context.WithoutCancel(ctx), entity, env)
					if err != nil {
						done[p] <- struct{}{}
					}
					return err
				})
				<-done[p]
				ps[p].done++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(end.Add(-o.Duration))
	err = bg.wait()
	_ = h.Stop(context.Background()) // no bound: nil
	if err != nil {
		return Measurement{}, fmt.Errorf("bench: hot handoff (commit %v): %w", commit, err)
	}
	name := "hot handoff"
	if !commit {
		name = "hot handoff, own write"
	}
	m := summarize(name, ps, elapsed)
	if err := checkTrimmed(ctx, rc, listKey, filled, m.Events); err != nil {
		return Measurement{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	return m, nil
}

// hotListPerSecond bounds the rate of a hot measurement (about 10 times this machine's):
// its list is filled with that many elements a second of o.Duration, one for each event.
const hotListPerSecond = 100_000

func hotListLen(o Options) int { return max(10_000, int(o.Duration.Seconds()*hotListPerSecond)) }

// fillList pushes n one-byte elements to the list key, in pipelined chunks.
func fillList(ctx context.Context, rc redis.UniversalClient, key string, n int) error {
	const chunk = 10_000
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < n; i += chunk {
			vs := make([]any, min(chunk, n-i))
			for j := range vs {
				vs[j] = "x"
			}
			p.RPush(ctx, key, vs...)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("filling the handlers' list: %w", err)
	}
	return nil
}

// checkTrimmed checks that the handlers' trims all landed: the list filled with filled
// elements lost one for each of the n events.
func checkTrimmed(ctx context.Context, rc redis.UniversalClient, key string, filled, n int) error {
	if n >= filled {
		return fmt.Errorf("%d events ran past the handlers' list of %d (raise hotListPerSecond)", n, filled)
	}
	left, err := rc.LLen(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("reading the handlers' list: %w", err)
	}
	if got := filled - int(left); got != n {
		return fmt.Errorf("the handlers trimmed %d elements after %d events", got, n)
	}
	return nil
}

// hotDrain measures the drain loop alone: the first event holds the turn while o.Duration
// x 4,000 events are queued behind it (by o.Producers goroutines), then the turn works
// through them, the handler committing hotHandoff's trim; the measured time runs from the
// first event's release to the last event's write. The turn leaves and is resumed every
// DrainMaxEvents events, as in hotHandoff.
func hotDrain(ctx context.Context, rc redis.UniversalClient, o Options) (Measurement, error) {
	const entity = "drain"
	listKey := lockhandoff.Key(o.Prefix, entity, "list")
	n := max(1000, int(o.Duration.Seconds()*4000))
	if err := fillList(ctx, rc, listKey, n+1); err != nil {
		return Measurement{}, fmt.Errorf("bench: hot drain: %w", err)
	}
	var (
		bg      background
		h       *lockhandoff.Handoff
		handled atomic.Int64
	)
	holding, gate, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h, err := lockhandoff.New(lockhandoff.Config{
		Redis:  rc,
		Prefix: o.Prefix + ":drain", Detached: o.Detached, MaxWait: n, Nudge: bg.nudge(ctx, &h), NeverQuarantine: true,
		Handler: lockhandoff.StepFunc(func(hctx context.Context, t lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
			if len(env) == 1 { // the first event: hold the turn until the list is full
				close(holding)
				select {
				case <-gate:
				case <-hctx.Done():
				}
				return lockhandoff.Result{}, nil
			}
			trim, err := t.Trim(listKey, 1)
			return lockhandoff.Result{Trims: []lockhandoff.Trim{trim}}, err
		}),
		Hooks: lockhandoff.Hooks{AfterTrims: func(_ string, _ []byte, err error) {
			if err != nil {
				bg.fail(fmt.Errorf("committed trim: %w", err))
			}
			if handled.Add(1) == int64(n) {
				close(finished)
			}
		}},
	})
	if err != nil {
		return Measurement{}, err
	}
	defer func() { _ = h.Stop(context.Background()) }()
	firstErr := make(chan error, 1)
	bg.run(func() error {
		_, err := h.Submit(context.WithoutCancel(ctx), entity, []byte{0})
		firstErr <- err
		return err
	})
	select {
	case <-holding:
	case err := <-firstErr: // it returned before its handler ran: it can only have failed
		return Measurement{}, fmt.Errorf("bench: hot drain: the first event did not take the turn: %w", err)
	case <-ctx.Done():
		return Measurement{}, ctx.Err()
	}
	// Queue n events behind it; every Submit must answer QUEUED.
	var next atomic.Int64
	fill := make([]error, o.Producers)
	var wg sync.WaitGroup
	for i := range fill {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				out, err := h.Submit(ctx, entity, []byte{1, 2})
				if err == nil && out != lockhandoff.OutcomeQueued {
					err = fmt.Errorf("submit behind a held turn answered %v", out)
				}
				if err != nil {
					fill[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(fill...); err != nil {
		close(gate)
		return Measurement{}, fmt.Errorf("bench: hot drain: filling: %w", err)
	}
	start := time.Now()
	close(gate)
	select {
	case <-finished:
	case <-ctx.Done():
		return Measurement{}, ctx.Err()
	}
	elapsed := time.Since(start)
	if err := bg.wait(); err != nil {
		return Measurement{}, fmt.Errorf("bench: hot drain: %w", err)
	}
	if err := checkTrimmed(ctx, rc, listKey, n+1, n); err != nil {
		return Measurement{}, fmt.Errorf("bench: hot drain: %w", err)
	}
	return Measurement{Name: "hot drain (no load)", Events: n, EPS: float64(n) / elapsed.Seconds()}, nil
}

// hotRedsync: the same load with a redsync mutex: lock (retrying), handler, unlock. Tries
// are raised so that no producer gives up.
func hotRedsync(ctx context.Context, rc redis.UniversalClient, o Options, name string, opts ...redsync.Option) (Measurement, error) {
	rs := redsync.New(goredis.NewPool(rc))
	lockKey := lockhandoff.Key(o.Prefix, "hot-redsync", "lock")
	counterKey := lockhandoff.Key(o.Prefix, "hot-redsync", "n")
	opts = append(opts, redsync.WithTries(math.MaxInt32))
	ps := make([]*producerStats, o.Producers)
	end := time.Now().Add(o.Duration)
	// Producers stuck in Lock at the end give up then; their unfinished waits are not
	// counted, which can only flatter redsync's figures.
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Value
	for p := range o.Producers {
		ps[p] = &producerStats{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := rs.NewMutex(lockKey, opts...)
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := m.LockContext(runCtx); err != nil {
					if runCtx.Err() == nil {
						failed.Store(err)
					}
					return
				}
				ps[p].add(time.Since(t0))
				err := rc.Incr(ctx, counterKey).Err()
				if _, uerr := m.UnlockContext(ctx); uerr != nil && err == nil {
					err = uerr
				}
				if err != nil {
					failed.Store(err)
					return
				}
				ps[p].done++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(end.Add(-o.Duration))
	if err, ok := failed.Load().(error); ok {
		return Measurement{}, fmt.Errorf("bench: %s: %w", name, err)
	}
	return summarize(name, ps, elapsed), nil
}

//go:embed spread_handler.lua
var spreadSrc string

var spreadScript = redis.NewScript(spreadSrc)

// SpreadRounds is how many alternating slices the spread measurement is cut into: on a
// shared machine the load changes within seconds, and alternating handoff and unlocked
// slices exposes both to the same changes.
const SpreadRounds = 10

// spreadSlice runs producers that pick a random entity for each event and call submit,
// for d.
func spreadSlice(ctx context.Context, o Options, d time.Duration, round int, entities []string, submit func(entity string) error) error {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var failed atomic.Value
	for p := range o.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), uint64(round)))
			for time.Now().Before(end) && ctx.Err() == nil {
				if err := submit(entities[r.IntN(len(entities))]); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	// A Submit that took a turn returns after handling its first envelope, and (inline)
	// after draining what queued behind it: once every producer returned, every event of
	// the slice was handled.
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return err
	}
	return nil
}

// spreadRun measures, over o.Keys entities and in alternating slices, handoff with
// o.Detached turns in the background (the order-worker's setting), handoff with every turn
// drained inline (Detached 0: Submit returns after its turn's release), and no lock. A
// slice of a handoff contender ends when its producers stopped and its last detached
// turn left: every event counted had its release. With detached turns, a producer's next
// Submit overlaps with its last event's release: more round trips are in flight than
// the 16 of the unlocked contender, as in an order-worker whose consumer handlers are
// free a round trip sooner.
func spreadRun(ctx context.Context, rc redis.UniversalClient, o Options) (detached, inline, unlocked Measurement, err error) {
	entities := make([]string, o.Keys)
	for i := range entities {
		entities[i] = fmt.Sprintf("LC-%06d", i)
	}
	env := []byte(`{"type":"order.placed"}`)
	type contender struct {
		name    string
		submit  func(entity string) error
		idle    func() <-chan struct{} // nil: nothing outlives a submit
		handled atomic.Int64
		took    time.Duration
	}
	var bg background
	newHandoff := func(c *contender, prefix string, detached int) (*lockhandoff.Handoff, error) {
		var h *lockhandoff.Handoff
		h, err := lockhandoff.New(lockhandoff.Config{
			Redis:  rc,
			Prefix: prefix, Detached: detached, Nudge: bg.nudge(ctx, &h), NeverQuarantine: true,
			Handler: lockhandoff.StepFunc(func(hctx context.Context, t lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
				err := spreadScript.Run(hctx, rc, []string{lockhandoff.Key(prefix, t.Entity, "doc")}).Err()
				if err == nil {
					c.handled.Add(1)
				}
				return lockhandoff.Result{}, err
			}),
		})
		if err != nil {
			return nil, err
		}
		c.submit = func(entity string) error {
			_, err := h.Submit(ctx, entity, env)
			return err
		}
		c.idle = h.Idle
		return h, nil
	}
	cs := []*contender{{name: "spread handoff"}, {name: "spread handoff, inline"}, {name: "spread unlocked"}}
	for i, detached := range []int{o.Detached, 0} {
		h, err := newHandoff(cs[i], fmt.Sprintf("%s:spread-%d", o.Prefix, i), detached)
		if err != nil {
			return Measurement{}, Measurement{}, Measurement{}, err
		}
		defer func() { _ = h.Stop(context.Background()) }()
	}
	uPrefix := o.Prefix + ":spread-unlocked"
	cs[2].submit = func(entity string) error {
		if err := spreadScript.Run(ctx, rc, []string{lockhandoff.Key(uPrefix, entity, "doc")}).Err(); err != nil {
			return err
		}
		cs[2].handled.Add(1)
		return nil
	}
	slice := max(o.Duration/SpreadRounds, 50*time.Millisecond)
	for r := range SpreadRounds {
		// Each round starts with the next contender, so that what a slice leaves behind
		// (garbage, a nudge's Resume) does not always fall on the same one.
		for i := range cs {
			c := cs[(r+i)%len(cs)]
			start := time.Now()
			if err := spreadSlice(ctx, o, slice, r, entities, c.submit); err != nil {
				return Measurement{}, Measurement{}, Measurement{}, fmt.Errorf("bench: %s: %w", c.name, err)
			}
			if c.idle != nil {
				<-c.idle()
			}
			c.took += time.Since(start)
		}
	}
	if err := bg.wait(); err != nil {
		return Measurement{}, Measurement{}, Measurement{}, fmt.Errorf("bench: spread handoff: resume: %w", err)
	}
	ms := make([]Measurement, len(cs))
	for i, c := range cs {
		n := c.handled.Load()
		ms[i] = Measurement{Name: c.name, Events: int(n), EPS: float64(n) / c.took.Seconds()}
	}
	return ms[0], ms[1], ms[2], nil
}

// cleanup deletes every key of the run, on every master of a cluster.
func cleanup(ctx context.Context, rc redis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	switch c := rc.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *redis.Client:
		return del(ctx, c)
	}
	return fmt.Errorf("bench: cleanup: unsupported client %T", rc)
}
