package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestTrimRunsWithTheStep(t *testing.T) { t.Parallel(); testTrimRunsWithTheStep(t, single) }
func TestTrimFailedLeavesTheEnvelope(t *testing.T) {
	t.Parallel()
	testTrimFailed(t, single)
}

// doneLog records the calls of Hooks.AfterTrims.
type doneLog struct {
	mu    sync.Mutex
	calls []string
}

func (d *doneLog) hook(_ string, envelope []byte, err error) {
	name := string(envelope)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case errors.Is(err, ErrTrimFailed):
		d.calls = append(d.calls, name+":failed")
	case err != nil:
		d.calls = append(d.calls, name+":"+err.Error())
	default:
		d.calls = append(d.calls, name+":OK")
	}
}

// trimming is a Handoff config whose handler is step, with NeverQuarantine, and whose
// AfterTrims hook is log's (when not nil).
func trimming(cfg Config, log *doneLog, step func(ctx context.Context, t Turn, envelope []byte) (Result, error)) Config {
	cfg.Handler, cfg.NeverQuarantine = StepFunc(step), true
	if log != nil {
		cfg.Hooks.AfterTrims = log.hook
	}
	return cfg
}

// trimOf is the Result of one trim of key, n.
func trimOf(t *testing.T, tr Turn, key string, n int) Result {
	t.Helper()
	w, err := tr.Trim(key, n)
	if err != nil {
		t.Errorf("Trim(%s, %d) in a handler: %v", key, n, err)
	}
	return Result{Trims: []Trim{w}}
}

func (d *doneLog) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// fillList pushes n elements to the list key.
func fillList(t *testing.T, rc redis.UniversalClient, key string, n int) {
	t.Helper()
	vs := make([]any, n)
	for i := range vs {
		vs[i] = fmt.Sprint(i)
	}
	if err := rc.RPush(context.Background(), key, vs...).Err(); err != nil {
		t.Fatal(err)
	}
}

// A handler's returned trims run in its step's script: after it returned and before the
// next envelope's handler starts (with the handoff), or with the release (the turn's last
// envelope, or a drain budget reached). Their outcomes reach Hooks.AfterTrims; a failed
// handler's trims are dropped; Trim refuses a Turn that is not a running handler's, keys
// of another hash tag, the turn's own keys and a negative count.
//
// Broken variants tried: handoff.lua ignoring ARGV[3..] (the trims never ran): the second
// handler saw the list whole, and AfterTrims was called with a nil error all the same;
// handle not reporting a failed run's dropped trims: AfterTrims never heard of "fails".
func testTrimRunsWithTheStep(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-commit"
	mark := Key(prefix, entity, "mark")
	fillList(t, rc, mark, 5)
	var (
		mu    sync.Mutex
		seen  []string
		saved Turn
		log   doneLog
	)
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, trimming(Config{HandlerRetries: -1}, &log, func(hctx context.Context, tr Turn, env []byte) (Result, error) {
		n, _ := rc.LLen(hctx, mark).Result()
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s@%d", env, n))
		if saved.Entity == "" {
			saved = tr
		}
		mu.Unlock()
		if string(env) == "e0" {
			// Three more envelopes queue behind us while we hold the turn. "fails" fails,
			// so the turn is left with it in proc and e3 behind it.
			for _, e := range []string{"e1", "fails", "e3"} {
				if out, err := hd.Submit(ctx, entity, []byte(e)); err != nil || out != OutcomeQueued {
					t.Errorf("%s: %v %v", e, out, err)
				}
			}
		}
		if _, err := tr.Trim(Key(prefix, "LC-other", "x"), 1); !errors.Is(err, ErrOtherSlot) {
			t.Errorf("Trim of another entity's key: %v, want ErrOtherSlot", err)
		}
		// Trims the step cannot send: the turn's own lists, a negative count.
		for _, bad := range []struct {
			key string
			n   int
		}{{Key(prefix, entity, "lock"), 1}, {Key(prefix, entity, "wait"), 1}, {Key(prefix, entity, "proc"), 1}, {mark, -1}} {
			if _, err := tr.Trim(bad.key, bad.n); !errors.Is(err, ErrBadTrim) {
				t.Errorf("Trim(%s, %d): %v, want ErrBadTrim", bad.key, bad.n, err)
			}
		}
		res := trimOf(t, tr, mark, 1)
		if string(env) == "fails" {
			return res, errors.New("boom")
		}
		return res, nil
	}), nil)
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if want := []string{"e0@5", "e1@4", "fails@3"}; !slices.Equal(seen, want) {
		t.Errorf("handlers saw %q, want %q", seen, want)
	}
	s := saved
	mu.Unlock()
	// "fails" failed: its trim was dropped and it stays in proc, e3 behind it.
	if got := rc.LRange(ctx, mark, 0, -1).Val(); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Errorf("mark = %q, want [2 3 4] (a failed handler's trim must be dropped)", got)
	}
	if want := []string{"e0:OK", "e1:OK", "fails:" + errDropped.Error()}; !slices.Equal(log.get(), want) {
		t.Errorf("AfterTrims calls %q, want %q", log.get(), want)
	}
	if _, err := s.Trim(mark, 1); err != nil {
		t.Errorf("Trim on a handler's Turn: %v", err)
	}
	if _, err := (Turn{Entity: entity}).Trim(mark, 1); !errors.Is(err, ErrNotInTurn) {
		t.Errorf("Trim on a Turn no handler was given: %v, want ErrNotInTurn", err)
	}

	// With the release: a budget of one envelope leaves the turn after e0, committing its
	// trim in leave.lua; e1 stays in wait.
	mark2 := Key(prefix, entity+"-2", "mark")
	fillList(t, rc, mark2, 3)
	var log2 doneLog
	var hd2 *Handoff
	hd2, _ = newTestHandoff(t, rc, prefix+"-2", trimming(Config{DrainMaxEvents: 1}, &log2, func(hctx context.Context, tr Turn, env []byte) (Result, error) {
		if string(env) == "e0" {
			if out, err := hd2.Submit(ctx, entity+"-2", []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
		}
		return trimOf(t, tr, mark2, 1), nil
	}), nil)
	if _, err := hd2.Submit(ctx, entity+"-2", []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k := hd2.keys(entity + "-2")
	if got := rc.LLen(ctx, mark2).Val(); got != 2 {
		t.Errorf("after a leave on the budget, the list holds %d, want 2", got)
	}
	if want := []string{"e0:OK"}; !slices.Equal(log2.get(), want) {
		t.Errorf("AfterTrims calls %q, want %q", log2.get(), want)
	}
	if proc := rc.LLen(ctx, k.proc).Val(); proc != 0 {
		t.Errorf("proc holds %d after a leave with e0 done", proc)
	}
	if wait := payloads(rc.LRange(ctx, k.wait, 0, -1).Val()); !slices.Equal(wait, []string{"e1"}) {
		t.Errorf("wait = %q, want [e1]", wait)
	}
}

// A committed trim that fails in Redis fails its envelope: the step does not happen, the
// envelope stays in proc with the rest of the list behind it, the turn is left, and the
// sweeper re-runs it before the rest.
//
// Broken variant tried: trims.lua not checking the pcall's error: the handoff went on, e1
// ran, and the envelope was not in proc.
func testTrimFailed(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-commit-fail"
	str, list := Key(prefix, entity, "str"), Key(prefix, entity, "list")
	if err := rc.Set(ctx, str, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fillList(t, rc, list, 5)
	rec := newRecorder()
	var log doneLog
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, trimming(Config{}, &log, func(hctx context.Context, tr Turn, env []byte) (Result, error) {
		rec.add(tr, env)
		if string(env) == "e0" && !tr.Rerun {
			if out, err := hd.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
			// LTRIM on a string: WRONGTYPE, in the step's script.
			return trimOf(t, tr, str, 1), nil
		}
		return trimOf(t, tr, list, 1), nil
	}), nil)
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k := hd.keys(entity)
	if got := payloads(rc.LRange(ctx, k.proc, 0, -1).Val()); !slices.Equal(got, []string{"e0"}) {
		t.Fatalf("proc = %q after a failed trim, want [e0]", got)
	}
	if got := payloads(rc.LRange(ctx, k.wait, 0, -1).Val()); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("wait = %q after a failed trim, want [e1]", got)
	}
	if n := rc.Exists(ctx, k.lock).Val(); n != 0 {
		t.Fatal("the turn was not left after a failed trim")
	}
	if got := rec.envelopes(); !slices.Equal(got, []string{"e0"}) {
		t.Fatalf("handlers ran %q, want [e0]", got)
	}
	if _, err := hd.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.envelopes(); !slices.Equal(got, []string{"e0", "e0", "e1"}) {
		t.Fatalf("after the sweep handlers ran %q, want [e0 e0 e1]", got)
	}
	if got := rc.LLen(ctx, list).Val(); got != 3 {
		t.Errorf("the list holds %d, want 3 (two trims)", got)
	}
	if want := []string{"e0:failed", "e0:OK", "e1:OK"}; !slices.Equal(log.get(), want) {
		t.Errorf("AfterTrims calls %q, want %q", log.get(), want)
	}

	// The same when the step is the release on a drain budget: the turn is left at once
	// (not held until the lease expires), with the envelope in proc.
	//
	// Broken variant tried: leaveDone without its trimFailed call: the lock stayed held.
	var hd2 *Handoff
	hd2, _ = newTestHandoff(t, rc, prefix+"-2", trimming(Config{DrainMaxEvents: 1}, nil, func(hctx context.Context, tr Turn, env []byte) (Result, error) {
		if string(env) == "e0" {
			if out, err := hd2.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
		}
		return trimOf(t, tr, str, 1), nil // WRONGTYPE
	}), nil)
	if _, err := hd2.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k2 := hd2.keys(entity)
	if got := payloads(rc.LRange(ctx, k2.proc, 0, -1).Val()); !slices.Equal(got, []string{"e0"}) {
		t.Errorf("budget leave: proc = %q after a failed trim, want [e0]", got)
	}
	if n := rc.Exists(ctx, k2.lock).Val(); n != 0 {
		t.Error("budget leave: the turn was not left after a failed trim")
	}
}

// An AfterTrims hook that panics does not take the worker down while it holds the turn:
// the panic is logged, and the turn goes on to the next envelope.
//
// Broken variant tried: settle calling the hook without its recover: the test binary
// crashed.
func TestTrimDonePanicIsContained(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	const entity = "LC-done-panic"
	list := Key(prefix, entity, "list")
	fillList(t, rc, list, 5)
	var hd *Handoff
	cfg := trimming(Config{}, nil, func(hctx context.Context, tr Turn, env []byte) (Result, error) {
		if string(env) == "e0" {
			if _, err := hd.Submit(ctx, entity, []byte("e1")); err != nil {
				t.Error(err)
			}
		}
		return trimOf(t, tr, list, 1), nil
	})
	cfg.Hooks.AfterTrims = func(string, []byte, error) { panic("boom") }
	hd, _ = newTestHandoff(t, rc, prefix, cfg, nil)
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if got := rc.LLen(ctx, list).Val(); got != 3 {
		t.Errorf("the list holds %d after two envelopes, want 3", got)
	}
}

// A Trim the handler built itself is checked when the run returns: one the step cannot
// send (another entity's key) fails the run, and nothing is trimmed.
//
// Broken variant tried: handle without its checkTrims: the envelope left proc.
func TestReturnedBadTrimFailsTheRun(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	const entity = "LC-bad-trim"
	other := Key(prefix, "LC-other", "list")
	fillList(t, rc, other, 3)
	hd, _ := newTestHandoff(t, rc, prefix, trimming(Config{HandlerRetries: -1}, nil, func(context.Context, Turn, []byte) (Result, error) {
		return Result{Trims: []Trim{{Key: other, N: 1}}}, nil
	}), nil)
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if got := rc.LLen(ctx, other).Val(); got != 3 {
		t.Errorf("another entity's list holds %d, want 3", got)
	}
	if got := payloads(rc.LRange(ctx, hd.keys(entity).proc, 0, -1).Val()); !slices.Equal(got, []string{"e0"}) {
		t.Errorf("proc = %q after a run with a bad trim, want [e0]", got)
	}
}
