package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/redis/redisscript"
)

// SweepStats says what one sweep did.
type SweepStats struct {
	// Checked is the number of index entries looked at.
	Checked int
	// Busy entities had a live holder: left alone.
	Busy int
	// Recovered backlogs had no holder: the sweep took their turn, re-ran proc, drained wait.
	Recovered int
	// Forgotten entities were idle and their index entries old: removed from the index.
	Forgotten int
}

// service is the sweeper's lifecycle.
type service struct {
	mu       sync.Mutex
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// Start starts the sweeper: a first sweep at once (it recovers what a previous run left),
// then one every SweepInterval, until Stop or ctx's end.
func (h *Handoff) Start(ctx context.Context) error {
	h.svc.mu.Lock()
	defer h.svc.mu.Unlock()
	if h.svc.started {
		return errors.New("lockhandoff: already started")
	}
	if h.isStopping() {
		return errors.New("lockhandoff: stopped")
	}
	h.svc.started = true
	ctx, h.svc.cancel = context.WithCancel(ctx)
	h.svc.done = make(chan struct{})
	go func() {
		defer close(h.svc.done)
		h.sweepLoop(ctx)
	}()
	return nil
}

// Stop stops the sweeper and waits until every drain in flight (of Submit, Resume or the
// sweeper) has left its turn: each finishes the envelope its handler runs, then releases
// the turn and calls Nudge when a backlog remains. Submits after Stop still queue; one that
// takes the turn handles one envelope and leaves.
//
// ctx bounds the handlers of detached turns: when it ends before every turn has left,
// those still running are cancelled, and their turns leave with the envelope in proc and
// a Nudge for the backlog (no caller's context reaches a detached turn; an inline one ends
// with its caller's). Stop still waits for those leaves, and for inline and sweeper turns,
// so it returns only once no turn of this Handoff is held; from then on, a detached turn's
// handler is cancelled at once. The order-worker bounds it with its shutdown budget; a ctx
// that never ends (context.Background) lets every handler finish.
//
// Stop returns ctx's error when ctx ended before Stop was done waiting (the handlers it
// cut short, if any, left their envelopes in proc, to be re-run), nil otherwise. It may be called again
// (the order-worker calls it once with its bound and once after its consumer returned):
// each call waits for the turns in flight.
func (h *Handoff) Stop(ctx context.Context) error {
	bound := context.AfterFunc(ctx, func() { h.abort(errStopBound) })
	h.svc.stopOnce.Do(func() { close(h.stopping) })
	h.svc.mu.Lock()
	cancel, done := h.svc.cancel, h.svc.done
	h.svc.mu.Unlock()
	if done != nil {
		<-done
		cancel()
	}
	<-h.drains.wait()
	if !bound() {
		return fmt.Errorf("lockhandoff: stop: %w", context.Cause(ctx))
	}
	return nil
}

// errStopBound is the cause a detached turn's handler sees when Stop's bound ends.
var errStopBound = errors.New("lockhandoff: stop: its bound ended before the turn left")

func (h *Handoff) sweepLoop(ctx context.Context) {
	for {
		st, err := h.sweep(ctx, h.cfg.IndexGrace)
		if err != nil && ctx.Err() == nil {
			h.log.Warn("lockhandoff: sweep failed", zap.Error(err))
		}
		if st.Recovered > 0 {
			h.log.Info("lockhandoff: sweeper recovered backlogs", zap.Int("recovered", st.Recovered))
		}
		select {
		case <-ctx.Done():
			return
		case <-h.stopping:
			return
		case <-time.After(h.cfg.SweepInterval):
		}
	}
}

// Sweep makes one pass over the backlog index: every entity with a backlog and no holder
// gets its turn taken and drained (proc first, then wait); idle entities whose entry was
// not refreshed since it was read are removed from the index. It looks at every entry,
// the youngest included; the periodic sweeps of Start look only at entries older than
// IndexGrace. It is exported for tests and operators.
func (h *Handoff) Sweep(ctx context.Context) (SweepStats, error) { return h.sweep(ctx, 0) }

// sweep is one pass over the index entries older than minAge. Entries of the last moments
// belong to pushes whose holder's lease outlasts them (a dead holder's lock expires
// LockTTL after its last renewal, and IndexGrace is LockTTL by default), so a periodic
// pass that looked at them could only find them busy or idle, or find a handler's failure
// whose re-run may as well wait: the pause between the runs of an envelope that keeps
// failing. Looking at every entry cost each replica a script per entity touched in the
// last IndexGrace on every pass (docs/performance.md, "Decisions kept").
func (h *Handoff) sweep(ctx context.Context, minAge time.Duration) (SweepStats, error) {
	var (
		st        SweepStats
		recovered atomic.Int64
		wg        sync.WaitGroup
		errs      []error
		errMu     sync.Mutex
	)
	sem := make(chan struct{}, h.cfg.SweepConcurrency)
	now := h.cfg.Now()
	cut := now.Add(-h.cfg.IndexGrace).UnixMilli() // forgettable when idle
	young := now.Add(-minAge).UnixMilli()         // looked at
	addErr := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}

	var idle []forgettable
	for shard := 0; shard < h.cfg.IndexShards && !h.isStopping() && ctx.Err() == nil; shard++ {
		key := indexKey(h.cfg.Prefix, shard)
		var cursor uint64
		for {
			vals, next, err := h.shared.ZScan(ctx, key, cursor, "", 256).Result()
			if err != nil {
				addErr(fmt.Errorf("scan %s: %w", key, err))
				break
			}
			ents, scores := make([]string, 0, len(vals)/2), make([]int64, 0, len(vals)/2)
			for i := 0; i+1 < len(vals); i += 2 {
				sc, _ := strconv.ParseFloat(vals[i+1], 64)
				if int64(sc) > young {
					continue
				}
				ents, scores = append(ents, vals[i]), append(scores, int64(sc))
			}
			states := h.states(ctx, ents)
			for i, e := range ents {
				if h.isStopping() {
					break
				}
				s := states[i]
				st.Checked++
				switch {
				case s.err != nil:
					// This entity only: the others of the page, and the later pages, are
					// still looked at. Its entry stays, so it is looked at again.
					addErr(s.err)
				case s.locked:
					st.Busy++
				case s.backlog > 0:
					sem <- struct{}{}
					wg.Add(1)
					go func(entity string) {
						defer func() { <-sem; wg.Done() }()
						took, err := h.resume(ctx, entity, "sweeper")
						if err != nil {
							addErr(err)
							return
						}
						if took {
							recovered.Add(1)
							h.m.recovered.Inc()
						}
					}(e)
				case scores[i] <= cut:
					if hook := h.cfg.Hooks.BeforeForget; hook != nil {
						hook(e)
					}
					idle = append(idle, forgettable{e, scores[i]})
				}
			}
			n, err := h.forget(ctx, key, idle)
			st.Forgotten += n
			if err != nil {
				addErr(err)
			}
			idle = idle[:0]
			if next == 0 {
				break
			}
			cursor = next
		}
	}
	wg.Wait()
	st.Recovered = int(recovered.Load())
	if err := errors.Join(errs...); err != nil {
		return st, fmt.Errorf("lockhandoff: sweep: %w", err)
	}
	return st, nil
}

type entityState struct {
	locked  bool
	backlog int64
	err     error // the state could not be read
}

// states reads the state of many entities in one round trip (per node, in a cluster).
func (h *Handoff) states(ctx context.Context, ents []string) []entityState {
	if len(ents) == 0 {
		return nil
	}
	calls := make([]redisscript.Call, len(ents))
	for i, e := range ents {
		k := h.keys(e)
		calls[i] = redisscript.Call{Keys: []string{k.lock, k.wait, k.proc}}
	}
	cmds := redisscript.Pipelined(ctx, h.rc, stateScript, calls)
	out := make([]entityState, len(ents))
	for i, c := range cmds {
		v, err := c.Int64Slice()
		if err != nil || len(v) != 3 {
			out[i].err = fmt.Errorf("state of %q: %v %w", ents[i], v, err)
			continue
		}
		out[i] = entityState{locked: v[0] == 1, backlog: v[1] + v[2]}
	}
	return out
}

// forgettable is an idle entity's index entry with the score the sweep read.
type forgettable struct {
	entity string
	score  int64
}

// forget removes idle entities' entries from one index shard, each only if its score is
// unchanged, in one round trip; it returns how many it removed.
func (h *Handoff) forget(ctx context.Context, shard string, idle []forgettable) (int, error) {
	if len(idle) == 0 {
		return 0, nil
	}
	calls := make([]redisscript.Call, len(idle))
	for i, f := range idle {
		calls[i] = redisscript.Call{Keys: []string{shard}, Args: []any{f.entity, f.score}}
	}
	n := 0
	var errs []error
	for i, c := range redisscript.Pipelined(ctx, h.rc, forgetScript, calls) {
		switch r, err := c.Int64(); {
		case err != nil:
			errs = append(errs, fmt.Errorf("forget %s: %w", idle[i].entity, err))
		case r == 1:
			n++
		}
	}
	return n, errors.Join(errs...)
}
