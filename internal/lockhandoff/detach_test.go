package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// gated is a handler that records its calls and holds envelope name until its gate opens.
type gated struct {
	rec     *recorder
	running map[string]chan struct{}
	gates   map[string]func() // opens the envelope's gate (once)
	gateCh  map[string]chan struct{}
}

func newGated(t *testing.T, names ...string) *gated {
	g := &gated{rec: newRecorder(), running: map[string]chan struct{}{}, gates: map[string]func(){}, gateCh: map[string]chan struct{}{}}
	for _, n := range names {
		g.running[n], g.gateCh[n] = make(chan struct{}), make(chan struct{})
		g.gates[n] = opener(t, g.gateCh[n])
	}
	return g
}

// newHandoff builds the test's Handoff; a failed test opens every gate before its Stop.
func (g *gated) newHandoff(t *testing.T, cfg Config) (*Handoff, redis.UniversalClient, string, *prometheus.Registry) {
	rc, prefix := single.client(t)
	hd, reg := newTestHandoff(t, rc, prefix, cfg, g.handle)
	t.Cleanup(func() {
		for _, open := range g.gates {
			open()
		}
	})
	return hd, rc, prefix, reg
}

func (g *gated) handle(ctx context.Context, turn Turn, env []byte) error {
	g.rec.add(turn, env)
	name := string(env)
	if running, ok := g.running[name]; ok {
		close(running)
		select {
		case <-g.gateCh[name]:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// submitAsync runs Submit in a goroutine and returns a channel that receives its error.
func submitAsync(hd *Handoff, ctx context.Context, entity, env string) <-chan error {
	c := make(chan error, 1)
	go func() {
		_, err := hd.Submit(ctx, entity, []byte(env))
		c <- err
	}()
	return c
}

// heldBehind submits e0 with ctx, queues rest behind it, lets e0's handler finish and
// waits until the handler of rest[0] runs (held at its gate). It returns the channel of
// e0's Submit: with a detached turn it delivers now, inline only once rest has run.
func (g *gated) heldBehind(t *testing.T, hd *Handoff, ctx context.Context, entity, e0 string, rest ...string) <-chan error {
	t.Helper()
	c := submitAsync(hd, ctx, entity, e0)
	<-g.running[e0]
	for _, e := range rest {
		if out, err := hd.Submit(context.Background(), entity, []byte(e)); err != nil || out != OutcomeQueued {
			t.Fatalf("%s: %v %v", e, out, err)
		}
	}
	g.gates[e0]()
	<-g.running[rest[0]]
	return c
}

// returns checks that c delivers (a Submit returned) without error; the timeout only
// guards against a hang.
func returns(t *testing.T, c <-chan error, what string) {
	t.Helper()
	select {
	case err := <-c:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// staysBlocked checks that c delivers nothing for a while: a Submit that must drain inline
// is still in its turn. It can only miss a defect, never report a false one.
func staysBlocked(t *testing.T, c <-chan error, what string) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("%s returned (%v) while a turn it waits for still had an envelope to run", what, err)
	case <-time.After(200 * time.Millisecond):
	}
}

// With Detached, a Submit that took the turn returns once its envelope was handled: the
// handoff to the envelope queued behind it, and that envelope's handler, run after it
// returned, and the turn still ends released with nothing lost.
//
// Broken variant tried: Detached 0 (every turn inline): e0's Submit stayed in the turn
// while e1's handler was held, and the test failed on its hang guard.
func TestDetachedSubmitReturnsAfterItsEnvelope(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach"
	ctx := context.Background()
	g := newGated(t, "e0", "e1")
	hd, rc, prefix, reg := g.newHandoff(t, Config{Detached: 4})

	first := g.heldBehind(t, hd, ctx, entity, "e0", "e1")
	returns(t, first, "e0's Submit, with e1's handler held")
	if got := counter(t, reg, "turns_detached"); got != 1 {
		t.Errorf("turns_detached = %v while e1 runs, want 1", got)
	}

	g.gates["e1"]()
	<-hd.Idle()
	if got := strings.Join(g.rec.envelopes(), ","); got != "e0,e1" {
		t.Errorf("ran %s", got)
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[] proc=[]`) {
		t.Errorf("after the detached turn: %s", s)
	}
	if got := counter(t, reg, "turns_detached"); got != 0 {
		t.Errorf("turns_detached = %v after the turn, want 0", got)
	}
}

// Stop waits for a detached turn as for an inline one: it finishes the envelope its
// handler runs, then leaves the turn, with the backlog left in place and a Nudge.
//
// Broken variant tried: the turn counted in flight only while runTurn ran (drains.exit
// deferred in runTurn instead of in the turn's goroutine): Stop returned while e1's
// handler was still held.
func TestStopWaitsForDetachedTurn(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-stop"
	ctx := context.Background()
	g := newGated(t, "e0", "e1")
	var nudges atomic.Int32
	hd, rc, prefix, _ := g.newHandoff(t, Config{Detached: 4, Nudge: func(context.Context, string) error {
		nudges.Add(1)
		return nil
	}})

	first := g.heldBehind(t, hd, ctx, entity, "e0", "e1", "e2")
	returns(t, first, "e0's Submit, with e1's handler held")

	stopped := make(chan error, 1)
	go func() { stopped <- hd.Stop(context.Background()) }()
	staysBlocked(t, stopped, "Stop")
	g.gates["e1"]()
	if err := <-stopped; err != nil {
		t.Errorf("Stop without a bound: %v", err)
	}
	if got := strings.Join(g.rec.envelopes(), ","); got != "e0,e1" {
		t.Errorf("ran %s before stopping", got)
	}
	if nudges.Load() != 1 {
		t.Errorf("nudges = %d, want 1", nudges.Load())
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[`) || !strings.Contains(s, `e2`) || !strings.Contains(s, `proc=[]`) {
		t.Errorf("after Stop: %s", s)
	}
}

// At most Detached turns go on in the background: with one detached already, the next
// turn drains inline, and its Submit returns only after the envelope queued behind it.
//
// Broken variant tried: no bound (acquireSlot always true): Y's Submit returned while
// y1's handler was held.
func TestDetachedIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGated(t, "x0", "x1", "y0", "y1")
	hd, _, _, _ := g.newHandoff(t, Config{Detached: 1})

	x := g.heldBehind(t, hd, ctx, "LC-x", "x0", "x1")
	returns(t, x, "X's Submit, with x1's handler held") // detached: the one slot
	y := g.heldBehind(t, hd, ctx, "LC-y", "y0", "y1")
	staysBlocked(t, y, "Y's Submit") // no slot left: inline
	g.gates["y1"]()
	if err := <-y; err != nil {
		t.Fatal(err)
	}
	g.gates["x1"]()
	<-hd.Idle()
	if got := len(g.rec.envelopes()); got != 4 {
		t.Errorf("ran %v", g.rec.envelopes())
	}
}

// Until its Submit returns, a detached turn follows the caller's context as an inline one
// does: a caller that goes away cancels the running handler, the envelope stays in proc
// and another replica is nudged.
//
// Broken variant tried: the turn's context detached from the caller's from the start
// (context.WithoutCancel only): the handler never saw the cancellation and the test
// failed on its hang guard.
func TestDetachedTurnFollowsCallerUntilItReturns(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-cancel"
	g := newGated(t, "e0")
	nudged := make(chan struct{}, 1)
	hd, rc, prefix, _ := g.newHandoff(t, Config{Detached: 4, HandlerRetries: -1, Nudge: func(context.Context, string) error {
		nudged <- struct{}{}
		return nil
	}})

	ctx, cancel := context.WithCancelCause(context.Background())
	gone := errors.New("caller gone")
	first := submitAsync(hd, ctx, entity, "e0")
	<-g.running["e0"]
	cancel(gone)
	returns(t, first, "e0's Submit, its handler cancelled")
	select {
	case <-nudged:
	case <-time.After(30 * time.Second):
		t.Fatal("no nudge after the caller went away")
	}
	<-hd.Idle()
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[]`) || !strings.Contains(s, `e0`) {
		t.Errorf("after the caller went away: %s", s)
	}
}

// After Submit returned, the caller's context no longer reaches the turn: a caller that
// cancels its context once Submit is back (defer cancel()) does not cut the turn short.
//
// Broken variant tried: runTurn without unfollow on detach: e1's handler was cancelled
// with the caller's context and e1 was left in proc.
func TestDetachedTurnOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-outlive"
	g := newGated(t, "e0", "e1")
	hd, rc, prefix, _ := g.newHandoff(t, Config{Detached: 4, HandlerRetries: -1})

	ctx, cancel := context.WithCancel(context.Background())
	first := g.heldBehind(t, hd, ctx, entity, "e0", "e1")
	returns(t, first, "e0's Submit, with e1's handler held")
	cancel()
	// Time for a turn that wrongly still follows ctx to see it end (context.AfterFunc
	// cancels on a goroutine of its own); on a correct tree nothing happens meanwhile.
	time.Sleep(200 * time.Millisecond)
	g.gates["e1"]()
	<-hd.Idle()
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[] proc=[]`) {
		t.Errorf("the turn did not finish after its caller went away: %s", s)
	}
}

// Submit returns before the step that follows its envelope: the caller does not wait for
// the release's round trip.
//
// Broken variant tried: detach called after the step (after the handoff's script): Submit
// stayed blocked in the step, and the test failed on its hang guard.
func TestDetachedSubmitReturnsBeforeTheStep(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-step"
	rec := newRecorder()
	inStep, stepGate := make(chan struct{}), make(chan struct{})
	openStep := opener(t, stepGate)
	var once sync.Once
	rc, prefix := single.client(t)
	hd, _ := newTestHandoff(t, rc, prefix, Config{Detached: 4, Hooks: Hooks{BeforeStep: func(string) {
		once.Do(func() { close(inStep) })
		<-stepGate
	}}}, func(_ context.Context, turn Turn, env []byte) error {
		rec.add(turn, env)
		return nil
	})
	t.Cleanup(openStep) // before the Stop registered above

	first := submitAsync(hd, context.Background(), entity, "e0")
	<-inStep
	returns(t, first, "e0's Submit, with its step held")
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `e0`) || strings.Contains(s, `lock=""`) {
		t.Errorf("before the step: %s", s)
	}
	openStep()
	<-hd.Idle()
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[] proc=[]`) {
		t.Errorf("after the step: %s", s)
	}
}

// Stop's context bounds the wait for detached turns: when it ends, the handlers still
// running are cancelled, and their turns leave with the envelope in proc and a nudge, as
// the order-worker needs within its shutdown budget; Stop then says the bound ended.
//
// Broken variants tried: Stop ignoring its context (the bound ignored): it waited for e1's
// held handler, and the test failed on its hang guard; the cut counted as a handler
// failure (handler_failures_total 1, which pages operations at every shutdown).
func TestStopBoundCutsDetachedHandlersShort(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-bound"
	g := newGated(t, "e0", "e1")
	nudged := make(chan struct{}, 1)
	hd, rc, prefix, reg := g.newHandoff(t, Config{Detached: 4, HandlerRetries: -1, Nudge: func(context.Context, string) error {
		nudged <- struct{}{}
		return nil
	}})

	first := g.heldBehind(t, hd, context.Background(), entity, "e0", "e1")
	returns(t, first, "e0's Submit, with e1's handler held")

	bound, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		err := hd.Stop(bound)
		if errors.Is(err, context.Canceled) {
			err = nil
		} else {
			err = fmt.Errorf("Stop past its bound answered %v, want context.Canceled", err)
		}
		stopped <- err
	}()
	staysBlocked(t, stopped, "Stop before its bound")
	cancel()
	returns(t, stopped, "Stop after its bound")
	select {
	case <-nudged:
	default:
		t.Error("no nudge for the backlog")
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[]`) || !strings.Contains(s, `e1`) {
		t.Errorf("after Stop past its bound: %s", s)
	}
	if got := counter(t, reg, "handler_failures_total"); got != 0 {
		t.Errorf("handler_failures_total = %v: a shutdown counted as a failure", got)
	}
}

// A panic outside the handler while the caller still waits (here in a Nudge hook, after
// the caller went away) reaches the caller, as it would inline.
//
// Broken variant tried: the turn's goroutine logging every panic: Submit returned as if
// the turn had gone well.
func TestPanicBeforeDetachReachesTheCaller(t *testing.T) {
	t.Parallel()
	const entity = "LC-detach-panic"
	g := newGated(t, "e0")
	hd, _, _, _ := g.newHandoff(t, Config{Detached: 4, HandlerRetries: -1, Nudge: func(context.Context, string) error {
		panic("nudge hook")
	}})

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		hd.Submit(ctx, entity, []byte("e0"))
	}()
	<-g.running["e0"]
	cancel()
	select {
	case r := <-got:
		if r != "nudge hook" {
			t.Errorf("Submit's caller got %v, want the hook's panic", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Submit did not return")
	}
}
