package lockhandoff

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A handler slower than the TTL keeps the turn through renewals: a Submit made after
// several TTLs still queues, and the holder hands off to it without losing its lease.
//
// Broken variant tried: newLease not starting the renewal timer: the lock expired after
// 300ms, the late Submit took the turn itself (OutcomeTurn) and the test failed.
func TestSlowHandlerKeepsTurnThroughRenewals(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-slow"
	ctx := context.Background()
	renewed := make(chan struct{}, 100)
	proceed := make(chan struct{})
	rec := newRecorder()
	hd, reg := newTestHandoff(t, rc, prefix, Config{
		LockTTL: 300 * time.Millisecond,
		Hooks: Hooks{AfterRenew: func(e string, ok bool, err error) {
			if ok {
				renewed <- struct{}{}
			}
		}},
	}, func(ctx context.Context, turn Turn, env []byte) error {
		rec.add(turn, env)
		if len(rec.snapshot()) == 1 {
			select {
			case <-proceed:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	holder := make(chan Outcome, 1)
	go func() { out, _ := hd.Submit(ctx, entity, []byte("e0")); holder <- out }()
	// Four renewals at TTL/3 each: more than one TTL has passed since the turn was taken.
	for range 4 {
		select {
		case <-renewed:
		case <-time.After(3 * time.Second): // hang guard
		}
	}
	out, err := hd.Submit(ctx, entity, []byte("e1"))
	close(proceed)
	if err != nil || out != OutcomeQueued {
		t.Fatalf("submit while the slow handler runs: %v %v (the turn was lost)", out, err)
	}
	if out := <-holder; out != OutcomeTurn {
		t.Fatalf("holder: %v", out)
	}
	calls := rec.waitFor(t, 2, 10*time.Second)
	if calls[1].envelope != "e1" || calls[1].turn.Token != calls[0].turn.Token || calls[1].turn.Seq != calls[0].turn.Seq+1 {
		t.Errorf("e1 was not handed off under the same lock: %+v", calls)
	}
	if got := counter(t, reg, "leases_lost_total"); got != 0 {
		t.Errorf("leases_lost_total = %v", got)
	}
}

// A handler whose renewal fails (its lock expired and a second holder took the turn) sees
// its context cancelled, and the second holder's fencing seq is higher.
//
// Broken variant tried: renew.lua extending the lock without comparing the token: the
// first holder's renewal extended the second holder's lock, its context was never
// cancelled and the test failed.
func TestFailedRenewalCancelsHandler(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-renewfail"
	ctx := context.Background()
	var (
		calls       atomic.Int32
		firstSeq    atomic.Int64
		secondSeq   atomic.Int64
		started     = make(chan struct{})
		cancelled   = make(chan error, 1)
		firstGaveUp = make(chan struct{})
	)
	hd, reg := newTestHandoff(t, rc, prefix, Config{LockTTL: 300 * time.Millisecond}, func(ctx context.Context, turn Turn, env []byte) error {
		switch calls.Add(1) {
		case 1:
			firstSeq.Store(turn.Seq)
			close(started)
			select {
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
			case <-time.After(5 * time.Second): // hang guard
				cancelled <- errors.New("context never cancelled")
			}
			close(firstGaveUp)
			return ctx.Err()
		case 2:
			// The second holder keeps its turn until the first handler gave up, so a
			// renewal that ignored the token would find a lock to extend.
			secondSeq.Store(turn.Seq)
			<-firstGaveUp
		}
		return nil
	})
	first := make(chan struct{})
	go func() { hd.Submit(ctx, entity, []byte("e0")); close(first) }()
	<-started
	// The first holder's lock expires (simulated at once): a second Submit finds the turn
	// free with e0 left in proc and takes it.
	if err := rc.Del(ctx, Key(prefix, entity, "lock")).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := hd.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeTurn {
		t.Fatalf("second holder: %v %v", out, err)
	}
	if cause := <-cancelled; !errors.Is(cause, errLeaseLost) {
		t.Errorf("first handler's context: %v, want lease lost", cause)
	}
	<-first
	if secondSeq.Load() <= firstSeq.Load() {
		t.Errorf("second holder's seq %d is not above the first's %d", secondSeq.Load(), firstSeq.Load())
	}
	if got := counter(t, reg, "leases_lost_total"); got < 1 {
		t.Errorf("leases_lost_total = %v", got)
	}
}

// A handler that hangs past its deadline (ignoring its context) loses the turn: renewal
// stops, the lock expires and the sweeper re-runs its event, then drains the wait list.
//
// Broken variant tried: lease.renew ignoring the handler's deadline: the hung holder kept
// renewing, the sweeper found the entity busy forever and the test failed on its guard.
func TestHungHandlerPastDeadlineIsRecovered(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-hung"
	ctx := context.Background()
	rec := newRecorder()
	hung := make(chan struct{})
	unhang := make(chan struct{})
	var first, unhangOnce sync.Once
	hd, reg := newTestHandoff(t, rc, prefix, Config{LockTTL: 300 * time.Millisecond, HandlerDeadline: 400 * time.Millisecond},
		func(ctx context.Context, turn Turn, env []byte) error {
			hangs := false
			first.Do(func() { hangs = true })
			if hangs {
				close(hung)
				<-unhang // ignores ctx: a truly hung handler
				return nil
			}
			rec.add(turn, env)
			return nil
		})
	// Registered after newTestHandoff's Stop, so it runs first: Stop waits for the hung drain.
	t.Cleanup(func() { unhangOnce.Do(func() { close(unhang) }) })
	holder := make(chan struct{})
	go func() { hd.Submit(ctx, entity, []byte("e0")); close(holder) }()
	<-hung
	if out, err := hd.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
		t.Fatalf("submit behind the hung handler: %v %v", out, err)
	}
	if err := hd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	calls := rec.waitFor(t, 2, 20*time.Second)
	if calls[0].envelope != "e0" || !calls[0].turn.Rerun || calls[1].envelope != "e1" {
		t.Errorf("recovered %+v, want a re-run of e0 then e1", calls)
	}
	unhangOnce.Do(func() { close(unhang) })
	<-holder
	if got := counter(t, reg, "handlers_abandoned_total"); got != 1 {
		t.Errorf("handlers_abandoned_total = %v", got)
	}
}

// A lease lost while a failed handler waits to be retried ends the retries: the handler
// is not called again (with an ended context, while another holder may run the envelope).
//
// Broken variant tried: the retry loop going on after the backoff whatever happened
// during it (the code before): the handler was called a second time.
func TestLeaseLostDuringRetryBackoffEndsTheRetries(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-retry-lost"
	ctx := context.Background()
	var calls atomic.Int64
	lost := make(chan struct{})
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		LockTTL: 300 * time.Millisecond, HandlerRetries: 3, RetryBackoff: 3 * time.Second,
		Hooks: Hooks{AfterRenew: func(string, bool, error) {}},
	}, func(ctx context.Context, turn Turn, env []byte) error {
		if calls.Add(1) == 1 {
			// Another holder takes over while this one backs off.
			rc.Set(ctx, Key(prefix, entity, "lock"), "someone-else", time.Minute)
			close(lost)
		}
		return errors.New("fails")
	})
	start := time.Now()
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	<-lost
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once: the lease was lost during the backoff", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Submit returned after %s: the backoff ran out instead of ending with the lease", took)
	}
}

// A handler that returned just past its deadline, before it was cut off, lets the turn go
// on; the next envelope's lease is still renewed.
//
// Broken variant tried: renew returning without re-arming its timer once it saw a passed
// deadline (the code before): no renewal came for the next envelope.
func TestRenewalResumesAfterAHandlerReturnedPastItsDeadline(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	renewed := make(chan bool, 10)
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		LockTTL: 300 * time.Millisecond,
		Hooks:   Hooks{AfterRenew: func(_ string, ok bool, _ error) { renewed <- ok }},
	}, func(context.Context, Turn, []byte) error { return nil })
	k := hd.keys("LC-deadline")
	rc.Set(context.Background(), k.lock, "tok", time.Minute)
	l := hd.newLease(context.Background(), "LC-deadline", k, "tok", time.Time{})
	defer l.stop()
	l.setDeadline(time.Now().Add(-time.Second)) // the handler is past its deadline
	time.Sleep(150 * time.Millisecond)          // deliberate: the first renewal comes due (at 100 ms) and is skipped
	l.setDeadline(time.Time{})                  // it returned: the next envelope runs
	select {
	case ok := <-renewed:
		if !ok {
			t.Fatal("renewal failed")
		}
	case <-time.After(time.Second):
		t.Fatal("no renewal after the turn went on")
	}
}

// The lease counts from when the script that gave the turn was sent: a reply that came
// later than a third of the TTL (a resent pipeline, a pause) is renewed at once, before
// any handler runs; and when that renewal fails (the lock expired and another took it),
// the lease is lost from the start.
//
// Broken variant tried: the first renewal a third of the TTL after the reply (the code
// before): no renewal came before newLease returned, and the lease was not lost.
func TestLeaseCountsFromWhenTheTurnWasTaken(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	renewed := make(chan bool, 10)
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		LockTTL: 3 * time.Second,
		Hooks:   Hooks{AfterRenew: func(_ string, ok bool, _ error) { renewed <- ok }},
	}, func(context.Context, Turn, []byte) error { return nil })
	k := hd.keys("LC-late")
	rc.Set(ctx, k.lock, "tok", 1500*time.Millisecond) // half the TTL already gone
	l := hd.newLease(ctx, "LC-late", k, "tok", time.Now().Add(-1500*time.Millisecond))
	defer l.stop()
	select {
	case ok := <-renewed:
		if !ok {
			t.Fatal("the renewal failed")
		}
	default:
		t.Fatal("no renewal before newLease returned")
	}
	if ttl := rc.PTTL(ctx, k.lock).Val(); ttl < 2500*time.Millisecond {
		t.Errorf("lock TTL %s after the renewal, want about 3s", ttl)
	}

	rc.Set(ctx, k.lock, "someone-else", time.Minute) // the lock expired and was taken
	lost := hd.newLease(ctx, "LC-late", k, "tok", time.Now().Add(-2*time.Second))
	defer lost.stop()
	if !lost.isLost() || lost.ctx.Err() == nil {
		t.Error("a lease whose late renewal failed is not lost")
	}
}
