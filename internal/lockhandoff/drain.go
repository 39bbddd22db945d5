package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/growstack"
)

var (
	errDeadline = errors.New("lockhandoff: handler deadline passed")
	errDropped  = errors.New("lockhandoff: trims dropped: their handler did not succeed")
)

// runTurn runs the turn the caller just took. With Config.Detached and a free slot, the
// turn runs on a goroutine of its own, and runTurn returns once its first envelope was
// handled (or the turn ended before that). Until then the turn's context follows ctx, so
// a caller that goes away while the first handler runs ends the turn as an inline one
// would; after, only Stop, Stop's bound or a lost lease end it early. Otherwise it
// drains inline.
func (h *Handoff) runTurn(ctx context.Context, entity string, k keys, token string, first entry, detachable bool) {
	// Entered before any goroutine starts, so that a Stop from now on waits for the turn.
	h.drains.enter()
	if !detachable || !h.acquireSlot() {
		defer h.drains.exit()
		h.drain(ctx, entity, k, token, first, nil)
		return
	}
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unfollow := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	unabort := context.AfterFunc(h.aborted, func() { cancel(context.Cause(h.aborted)) })
	returned := make(chan struct{})
	var once sync.Once
	// ret lets the caller return. After unfollow, ctx no longer reaches the turn; when
	// ctx ended first, the turn is being cancelled already and leaves as an inline one.
	ret := func() {
		unfollow()
		once.Do(func() { close(returned) })
	}
	// Written by the turn's goroutine before it closes returned, read by the caller after.
	var (
		detached bool
		panicked any // a panic before the detach, passed on to the caller
	)
	go func() {
		growstack.Grow()
		defer h.drains.exit()
		defer h.releaseSlot()
		defer cancel(nil)
		defer unabort()
		defer ret()
		defer func() {
			r := recover()
			switch {
			case r == nil:
			case !detached:
				panicked = r // the caller is still waiting: it panics, as inline
			default:
				// Inline, the caller's recover (the consumer's) would contain a panic
				// outside the handler (a Nudge hook, say); here nothing would. The lease
				// is stopped by now: the lock was released or expires, and the sweeper
				// recovers what is left.
				h.log.Error("lockhandoff: detached turn panicked; the sweeper recovers what it left",
					zap.String("lcid", entity), zap.Any("panic", r))
			}
		}()
		h.drain(tctx, entity, k, token, first, func() {
			detached = true
			ret()
		})
	}()
	<-returned
	if panicked != nil {
		panic(panicked)
	}
}

// acquireSlot takes one of Config.Detached slots: a turn on a goroutine of its own.
func (h *Handoff) acquireSlot() bool {
	for {
		n := h.slots.Load()
		if n >= int64(h.cfg.Detached) {
			return false
		}
		if h.slots.CompareAndSwap(n, n+1) {
			h.m.detached.Inc()
			return true
		}
	}
}

func (h *Handoff) releaseSlot() {
	h.slots.Add(-1)
	h.m.detached.Dec()
}

// Idle returns a channel closed once no turn of this Handoff is in flight, inline or
// detached (Submit, Resume or the sweeper). A turn taken after it closed is not waited
// for. It is for tests and benchmarks: with Config.Detached, a turn can outlive the
// Submit that took it.
func (h *Handoff) Idle() <-chan struct{} { return h.drains.wait() }

// drain runs the turn the caller just took: the handler for first, then for each envelope
// handed off, until the list is empty or the turn has to be left. detach, when not nil,
// is called once first was handled and before the step that follows it.
func (h *Handoff) drain(ctx context.Context, entity string, k keys, token string, first entry, detach func()) {
	l := h.newLease(ctx, entity, k, token, first.sent)
	defer l.stop()
	if l.isLost() {
		// The reply that gave the turn came so late that the lease had to be renewed
		// at once, and that failed: another holder may have the envelope already.
		return
	}

	start := h.cfg.Now()
	cur := first
	for n := 1; ; n++ {
		h.m.waited.Observe(float64(max(cur.nowMs-cur.enqMs, 0)) / 1000)
		res, trims := h.handle(l, cur)
		if res == handledOK {
			if detach != nil {
				detach()
				detach = nil
			}
			if hook := h.cfg.Hooks.BeforeStep; hook != nil {
				hook(entity)
			}
		}
		switch res {
		case handledLost:
			return
		case handledAbandoned, handledFailed:
			// The envelope stays in proc and the index entry stays: the sweeper (or the next
			// Submit, which starts from the backlog) re-runs it. A failure caused by shutdown
			// is handed to another replica at once.
			h.leave(entity, k, token, false, res == handledFailed && (h.isStopping() || ctx.Err() != nil))
			return
		}
		stopping := h.isStopping() || ctx.Err() != nil
		if stopping || n >= h.cfg.DrainMaxEvents || h.cfg.Now().Sub(start) >= h.cfg.DrainMaxTime {
			h.leaveDone(entity, k, token, cur, trims)
			return
		}
		// The caller's ctx is still live here (checked above); if it ends during the call,
		// the error path below gives the turn back with a context of its own. The
		// handler's committed trims run in the handoff's script, before the handoff.
		next, more, err := h.runHandoff(ctx, k, token, cur.seq, trims)
		h.settle(entity, cur.envelope, trims, err)
		switch {
		case errors.Is(err, errLeaseLost):
			l.lose(errLeaseLost)
			return
		case errors.Is(err, ErrTrimFailed):
			h.trimFailed(entity, k, token, cur, err)
			return
		case err != nil:
			// Unknown whether the handoff ran (or, stale, known that an earlier send of it
			// did, with its reply lost): proc holds either the finished envelope or the
			// next one, both safe to re-run. Give the turn back if it is still ours; when
			// the caller is going away, to another replica at once.
			// A stale step means an earlier send of it ran: its next envelope, if any, is in
			// proc under a lock we now release, so another replica is nudged to take it
			// rather than leaving it to the sweeper.
			h.log.Warn("lockhandoff: handoff failed", zap.String("lcid", entity), zap.Error(err))
			h.leave(entity, k, token, false, ctx.Err() != nil || errors.Is(err, errStaleStep))
			return
		case !more:
			return
		}
		h.m.handedOff.Inc()
		l.setSeq(next.seq)
		cur = next
	}
}

// leaveDone leaves the turn after the envelope cur was handled, committing its trims,
// and nudges another replica to take over the backlog.
func (h *Handoff) leaveDone(entity string, k keys, token string, cur entry, trims []Trim) {
	ctx, cancel := h.bookkeepingCtx(context.Background())
	defer cancel()
	left, err := h.runLeave(ctx, k, token, true, trims)
	h.settle(entity, cur.envelope, trims, err)
	h.afterLeave(ctx, entity, left, err, true)
	if errors.Is(err, ErrTrimFailed) {
		h.trimFailed(entity, k, token, cur, err)
	}
}

// trimFailed leaves the turn after a trim committed with the step failed: the envelope
// stays in proc, as after a handler that failed, and the sweeper re-runs it.
func (h *Handoff) trimFailed(entity string, k keys, token string, cur entry, err error) {
	h.m.failed.Inc()
	h.log.Warn("lockhandoff: a trim committed with the step failed; envelope left in proc for the sweeper",
		zap.String("lcid", entity), zap.Int64("seq", cur.seq), zap.Error(err))
	h.leave(entity, k, token, false, false)
}

// leave releases the turn with any backlog left in place; done says whether the envelope
// in proc was processed. With nudge, another replica is nudged to resume the backlog: after
// a graceful leave (budget, Stop, caller's context). After a failure the sweeper takes over
// instead, which spaces the re-runs of a failing envelope by the sweep interval.
func (h *Handoff) leave(entity string, k keys, token string, done, nudge bool) {
	ctx, cancel := h.bookkeepingCtx(context.Background())
	defer cancel()
	left, err := h.runLeave(ctx, k, token, done, nil)
	h.afterLeave(ctx, entity, left, err, nudge)
}

// afterLeave logs a failed leave, counts a lost lease, and nudges another replica when
// nudge is set and a backlog is left.
func (h *Handoff) afterLeave(ctx context.Context, entity string, left int64, err error, nudge bool) {
	switch {
	case errors.Is(err, ErrTrimFailed):
		return // the caller leaves again, without the trims
	case errors.Is(err, errLeaseLost):
		h.m.leasesLost.Inc()
		return
	case err != nil:
		h.log.Warn("lockhandoff: leave failed; the lease expires instead", zap.String("lcid", entity), zap.Error(err))
		return
	case left == 0 || !nudge:
		return
	}
	if h.cfg.Nudge == nil {
		return
	}
	if err := h.cfg.Nudge(ctx, entity); err != nil {
		h.log.Warn("lockhandoff: nudge failed; the sweeper resumes the backlog", zap.String("lcid", entity), zap.Error(err))
	}
}

// bookkeepingCtx bounds the scripts that end a turn. They must run even when the caller's
// context is cancelled, or a cancelled caller would leave its turn to expire.
func (h *Handoff) bookkeepingCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), h.cfg.LockTTL)
}

type handled int

const (
	handledOK handled = iota
	handledFailed
	handledAbandoned
	handledLost
)

// handle runs the handler for one envelope, retrying a failure a bounded number of times
// inside the turn. With handledOK it returns the trims the handler returned.
func (h *Handoff) handle(l *lease, e entry) (handled, []Trim) {
	if e.rerun && !h.cfg.NeverQuarantine {
		// An envelope left in proc may have failed its last allowed run just before its
		// holder went away, or an operator asked for its skip: only a re-run can be due,
		// so a first run pays no read.
		ctx, cancel := h.bookkeepingCtx(l.ctx)
		f, err := readFailure(ctx, h.shared, h.cfg.Prefix, l.entity, e.raw)
		cancel()
		if err != nil {
			h.log.Warn("lockhandoff: failure count not read", zap.String("lcid", l.entity), zap.Error(err))
		} else if h.due(f) {
			return h.quarantine(l, e, f)
		}
	}
	// RetryBackoff, doubling, without jitter or cap: HandlerRetries is a few re-runs.
	pauses := &backoff.ExponentialBackOff{InitialInterval: h.cfg.RetryBackoff, Multiplier: 2, MaxInterval: math.MaxInt64}
	for attempt := 0; ; attempt++ {
		deadline := time.Now().Add(h.cfg.HandlerDeadline)
		l.setDeadline(deadline)
		hctx, cancel := context.WithDeadlineCause(l.ctx, deadline, errDeadline)
		t := Turn{Entity: l.entity, Seq: e.seq, Token: l.token, Rerun: e.rerun || attempt > 0, k: l.k}
		res, err := callHandler(h.handler, hctx, t, e.envelope)
		cause := context.Cause(hctx)
		cancel()
		if err == nil {
			err = checkTrims(l.k, res.Trims)
		}
		trims := res.Trims
		l.setDeadline(time.Time{})
		if err == nil && !l.isLost() && !errors.Is(cause, errDeadline) {
			return handledOK, trims
		}
		if l.isLost() {
			h.settle(l.entity, e.envelope, trims, errLeaseLost)
		} else {
			h.settle(l.entity, e.envelope, trims, errDropped)
		}
		switch {
		case l.isLost():
			return handledLost, nil
		case errors.Is(cause, errStopBound):
			// Shutdown, not a failure: no alert for it, and no count.
			h.log.Info("lockhandoff: handler cut short by the stop bound; envelope left in proc",
				zap.String("lcid", l.entity), zap.Int64("seq", e.seq))
			return handledFailed, nil
		}
		// A failed run, counted in the entity's slot so that the runs of every turn and
		// worker add up: once they reach MaxAttempts the envelope leaves the turn, and
		// the entity's later events no longer wait behind it.
		runErr := err
		if errors.Is(cause, errDeadline) {
			runErr = fmt.Errorf("%w (%v)", errDeadline, h.cfg.HandlerDeadline)
		}
		f, ok := h.recordFailure(l, e, runErr)
		if !h.cfg.NeverQuarantine && err != nil && res.Quarantine {
			f.Immediate, f.LastError = true, errorText(err)
			return h.quarantine(l, e, f)
		}
		if ok && h.due(f) {
			return h.quarantine(l, e, f)
		}
		switch {
		case errors.Is(cause, errDeadline):
			h.m.abandoned.Inc()
			h.log.Warn("lockhandoff: handler passed its deadline; turn left to the sweeper",
				zap.String("lcid", l.entity), zap.Int64("seq", e.seq), zap.Duration("deadline", h.cfg.HandlerDeadline))
			return handledAbandoned, nil
		case attempt >= max(h.cfg.HandlerRetries, 0) || h.isStopping() || l.ctx.Err() != nil:
			h.m.failed.Inc()
			h.log.Warn("lockhandoff: handler failed; envelope left in proc for the sweeper",
				zap.String("lcid", l.entity), zap.Int64("seq", e.seq), zap.Int("attempts", attempt+1), zap.Error(err))
			return handledFailed, nil
		}
		timer := time.NewTimer(pauses.NextBackOff())
		select {
		case <-timer.C:
		case <-l.ctx.Done():
			timer.Stop()
		case <-h.stopping:
			timer.Stop()
		}
		// A lease lost or a stop during the backoff ends the retries: another holder may
		// run the envelope now, and a handler called with an ended context could only fail.
		switch {
		case l.isLost():
			return handledLost, nil
		case h.isStopping() || l.ctx.Err() != nil:
			h.m.failed.Inc()
			h.log.Warn("lockhandoff: handler failed; envelope left in proc for the sweeper",
				zap.String("lcid", l.entity), zap.Int64("seq", e.seq), zap.Int("attempts", attempt+1), zap.Error(err))
			return handledFailed, nil
		}
	}
}

func callHandler(h Handler, ctx context.Context, t Turn, envelope []byte) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = Result{}, fmt.Errorf("lockhandoff: handler panicked: %v", r)
		}
	}()
	return h.Step(ctx, t, envelope)
}

// lease keeps a turn's lock alive while its handlers run: renewal every LockTTL/3, token
// checked, and never past the running handler's deadline. Its ctx, the parent of every
// handler ctx of the turn, is cancelled when the lease is lost.
type lease struct {
	h      *Handoff
	entity string
	k      keys
	token  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   atomic.Bool

	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
	deadline time.Time // of the running handler; zero between handlers
	seq      int64
}

// newLease starts renewing the lock taken by a script sent at sent (zero: now). The lock's
// TTL runs from when that script ran, not from when its reply arrived: a reply delayed
// (a resent pipeline, a GC pause) past a third of the TTL makes newLease renew at once,
// before any handler runs, and a failed renewal returns the lease lost.
func (h *Handoff) newLease(ctx context.Context, entity string, k keys, token string, sent time.Time) *lease {
	l := &lease{h: h, entity: entity, k: k, token: token}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	wait := h.cfg.LockTTL / 3
	if !sent.IsZero() {
		wait -= time.Since(sent)
	}
	if wait > 0 {
		l.timer = time.AfterFunc(wait, l.renew)
		return l
	}
	l.timer = time.AfterFunc(time.Hour, l.renew)
	l.timer.Stop()
	l.renew() // re-arms the timer when it succeeds
	return l
}

func (l *lease) setDeadline(d time.Time) {
	l.mu.Lock()
	l.deadline = d
	l.mu.Unlock()
}

func (l *lease) setSeq(seq int64) {
	l.mu.Lock()
	l.seq = seq
	l.mu.Unlock()
}

func (l *lease) isLost() bool { return l.lost.Load() }

func (l *lease) renew() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if !l.deadline.IsZero() && !time.Now().Before(l.deadline) {
		// The handler is abandoned: skip the renewal so that a hung worker cannot hold the
		// entity's turn; the lock expires within LockTTL and the sweeper recovers it. The
		// timer stays armed: a handler that returned just past its deadline, before it was
		// cut off, lets the turn go on, and the next handler's lease must be renewed again
		// (a renewal after the lock expired fails, and cancels that handler).
		l.timer.Reset(l.h.cfg.LockTTL / 3)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), l.h.cfg.LockTTL/3)
	ok, err := l.h.runRenew(ctx, l.k, l.token)
	cancel()
	if hook := l.h.cfg.Hooks.AfterRenew; hook != nil {
		hook(l.entity, ok, err)
	}
	if err != nil || !ok {
		// A failed renewal cannot tell whether the lease still holds: treat it as lost, so
		// that the handler stops before a second holder may start.
		l.lose(fmt.Errorf("%w: renewal: ok=%v err=%v", errLeaseLost, ok, err))
		return
	}
	l.mu.Lock()
	if !l.stopped {
		l.timer.Reset(l.h.cfg.LockTTL / 3)
	}
	l.mu.Unlock()
}

// lose marks the lease lost and cancels the running handler.
func (l *lease) lose(cause error) {
	l.mu.Lock()
	stopped := l.stopped
	seq := l.seq
	l.mu.Unlock()
	if stopped || !l.lost.CompareAndSwap(false, true) {
		return
	}
	l.h.m.leasesLost.Inc()
	l.h.log.Warn("lockhandoff: lease lost; handler cancelled", zap.String("lcid", l.entity),
		zap.Int64("seq", seq), zap.Error(cause))
	l.cancel(cause)
}

func (l *lease) stop() {
	l.mu.Lock()
	l.stopped = true
	l.timer.Stop()
	l.mu.Unlock()
	l.cancel(nil)
}

// drainSet counts the drains in flight so that Stop can wait until they left their turn.
type drainSet struct {
	mu     sync.Mutex
	active int
	idle   chan struct{} // closed when active drops to 0, while Stop waits
}

func (s *drainSet) enter() {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
}

func (s *drainSet) exit() {
	s.mu.Lock()
	s.active--
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// wait returns a channel closed when no drain is in flight.
func (s *drainSet) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

func (h *Handoff) isStopping() bool {
	select {
	case <-h.stopping:
		return true
	default:
		return false
	}
}
