package lockhandoff

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestCommitRunsWithTheStep(t *testing.T) { t.Parallel(); testCommitRunsWithTheStep(t, single) }
func TestCommitFailedWriteLeavesTheEnvelope(t *testing.T) {
	t.Parallel()
	testCommitFailedWrite(t, single)
}

// doneLog records the calls of Write.Done.
type doneLog struct {
	mu    sync.Mutex
	calls []string
}

func (d *doneLog) done(name string) func(any, error) {
	return func(reply any, err error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		switch {
		case errors.Is(err, ErrWriteFailed):
			d.calls = append(d.calls, name+":failed")
		case err != nil:
			d.calls = append(d.calls, name+":"+err.Error())
		default:
			d.calls = append(d.calls, name+":"+fmtReply(reply))
		}
	}
}

func (d *doneLog) get() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func fmtReply(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return "int"
	case nil:
		return "nil"
	}
	return "?"
}

// A handler's committed writes run in its step's script: after it returned and before the
// next envelope's handler starts (with the handoff), or with the release (the turn's last
// envelope, or a drain budget reached). Their replies reach Write.Done; a failed handler's
// writes are dropped; Commit refuses a context that is not a running handler's, and keys of
// another hash tag.
//
// Broken variant tried: handoff.lua ignoring ARGV[3..] (the writes never ran): the second
// handler saw no mark, and Done got no reply.
func testCommitRunsWithTheStep(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-commit"
	mark := Key(prefix, entity, "mark")
	var (
		mu    sync.Mutex
		seen  []string
		saved context.Context
		log   doneLog
	)
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, Config{HandlerRetries: -1}, func(hctx context.Context, tr Turn, env []byte) error {
		v, _ := rc.Get(hctx, mark).Result()
		mu.Lock()
		seen = append(seen, string(env)+"@"+v)
		if saved == nil {
			saved = hctx
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
		if err := Commit(hctx, Write{Cmd: "SET", Keys: []string{Key(prefix, "LC-other", "x")}, Args: []any{1}}); !errors.Is(err, ErrOtherSlot) {
			t.Errorf("Commit of another entity's key: %v, want ErrOtherSlot", err)
		}
		// Writes Commit cannot send: an argument go-redis cannot encode (it would fail
		// the whole shared pipeline), the turn's own lock, too many arguments for unpack.
		for _, bad := range []Write{
			{Cmd: "RPUSH", Keys: []string{mark}, Args: []any{[]string{"a", "b"}}},
			{Cmd: "DEL", Keys: []string{Key(prefix, entity, "lock")}},
			{Cmd: "RPUSH", Keys: []string{mark}, Args: make([]any, MaxWriteArgs)},
			{Keys: []string{mark}},
		} {
			if err := Commit(hctx, bad); !errors.Is(err, ErrBadWrite) {
				t.Errorf("Commit(%s %v): %v, want ErrBadWrite", bad.Cmd, bad.Keys, err)
			}
		}
		w := Write{Cmd: "SET", Keys: []string{mark}, Args: []any{"after-" + string(env)}, Done: log.done(string(env))}
		if err := Commit(hctx, w); err != nil {
			t.Errorf("Commit in a handler: %v", err)
		}
		if string(env) == "fails" {
			return errors.New("boom")
		}
		return nil
	})
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if want := []string{"e0@", "e1@after-e0", "fails@after-e1"}; !slices.Equal(seen, want) {
		t.Errorf("handlers saw %q, want %q", seen, want)
	}
	s := saved
	mu.Unlock()
	// "fails" failed: its write was dropped and it stays in proc, e3 behind it.
	if got := rc.Get(ctx, mark).Val(); got != "after-e1" {
		t.Errorf("mark = %q, want after-e1 (a failed handler's write must be dropped)", got)
	}
	if want := []string{"e0:OK", "e1:OK", "fails:" + errDropped.Error()}; !slices.Equal(log.get(), want) {
		t.Errorf("Done calls %q, want %q", log.get(), want)
	}
	if err := Commit(s, Write{Cmd: "SET", Keys: []string{mark}, Args: []any{"late"}}); !errors.Is(err, ErrNotInTurn) {
		t.Errorf("Commit after the handler returned: %v, want ErrNotInTurn", err)
	}
	if err := Commit(ctx, Write{Cmd: "SET", Keys: []string{mark}, Args: []any{"x"}}); !errors.Is(err, ErrNotInTurn) {
		t.Errorf("Commit outside a handler: %v, want ErrNotInTurn", err)
	}

	// With the release: a budget of one envelope leaves the turn after e0, committing its
	// write in leave.lua; e1 stays in wait.
	mark2 := Key(prefix, entity+"-2", "mark")
	var log2 doneLog
	var hd2 *Handoff
	hd2, _ = newTestHandoff(t, rc, prefix+"-2", Config{DrainMaxEvents: 1}, func(hctx context.Context, tr Turn, env []byte) error {
		if string(env) == "e0" {
			if out, err := hd2.Submit(ctx, entity+"-2", []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
		}
		return Commit(hctx, Write{Cmd: "INCR", Keys: []string{mark2}, Done: log2.done(string(env))})
	})
	if _, err := hd2.Submit(ctx, entity+"-2", []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k := hd2.keys(entity + "-2")
	if got := rc.Get(ctx, mark2).Val(); got != "1" {
		t.Errorf("after a leave on the budget, counter = %q, want 1", got)
	}
	if want := []string{"e0:int"}; !slices.Equal(log2.get(), want) {
		t.Errorf("Done calls %q, want %q", log2.get(), want)
	}
	if proc := rc.LLen(ctx, k.proc).Val(); proc != 0 {
		t.Errorf("proc holds %d after a leave with e0 done", proc)
	}
	if wait := payloads(rc.LRange(ctx, k.wait, 0, -1).Val()); !slices.Equal(wait, []string{"e1"}) {
		t.Errorf("wait = %q, want [e1]", wait)
	}
}

// A committed write that fails in Redis fails its envelope: the step does not happen, the
// envelope stays in proc with the rest of the list behind it, the turn is left, and the
// sweeper re-runs it before the rest.
//
// Broken variant tried: writes.lua not checking the pcall's error: the handoff went on, e1
// ran, and the envelope was not in proc.
func testCommitFailedWrite(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-commit-fail"
	list, count := Key(prefix, entity, "list"), Key(prefix, entity, "n")
	if err := rc.RPush(ctx, list, "x").Err(); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	var log doneLog
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, Config{}, func(hctx context.Context, tr Turn, env []byte) error {
		rec.add(tr, env)
		if string(env) == "e0" && !tr.Rerun {
			if out, err := hd.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
			// INCR on a list: WRONGTYPE, in the step's script.
			return Commit(hctx, Write{Cmd: "INCR", Keys: []string{list}, Done: log.done("e0")})
		}
		return Commit(hctx, Write{Cmd: "INCR", Keys: []string{count}, Done: log.done(string(env))})
	})
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k := hd.keys(entity)
	if got := payloads(rc.LRange(ctx, k.proc, 0, -1).Val()); !slices.Equal(got, []string{"e0"}) {
		t.Fatalf("proc = %q after a failed write, want [e0]", got)
	}
	if got := payloads(rc.LRange(ctx, k.wait, 0, -1).Val()); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("wait = %q after a failed write, want [e1]", got)
	}
	if n := rc.Exists(ctx, k.lock).Val(); n != 0 {
		t.Fatal("the turn was not left after a failed write")
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
	if got := rc.Get(ctx, count).Val(); got != "2" {
		t.Errorf("counter = %q, want 2", got)
	}
	if want := []string{"e0:failed", "e0:int", "e1:int"}; !slices.Equal(log.get(), want) {
		t.Errorf("Done calls %q, want %q", log.get(), want)
	}

	// The same when the step is the release on a drain budget: the turn is left at once
	// (not held until the lease expires), with the envelope in proc.
	//
	// Broken variant tried: leaveDone without its writeFailed call: the lock stayed held.
	var hd2 *Handoff
	hd2, _ = newTestHandoff(t, rc, prefix+"-2", Config{DrainMaxEvents: 1}, func(hctx context.Context, tr Turn, env []byte) error {
		if string(env) == "e0" {
			if out, err := hd2.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
		}
		return Commit(hctx, Write{Cmd: "INCR", Keys: []string{list}}) // WRONGTYPE
	})
	if _, err := hd2.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	k2 := hd2.keys(entity)
	if got := payloads(rc.LRange(ctx, k2.proc, 0, -1).Val()); !slices.Equal(got, []string{"e0"}) {
		t.Errorf("budget leave: proc = %q after a failed write, want [e0]", got)
	}
	if n := rc.Exists(ctx, k2.lock).Val(); n != 0 {
		t.Error("budget leave: the turn was not left after a failed write")
	}
}

// A Write.Done that panics does not take the worker down while it holds the turn: the
// panic is logged, and the turn goes on to the next envelope.
//
// Broken variant tried: settle calling Done without its recover: the test binary crashed.
func TestCommitDonePanicIsContained(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	const entity = "LC-done-panic"
	count := Key(prefix, entity, "n")
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, Config{}, func(hctx context.Context, tr Turn, env []byte) error {
		if string(env) == "e0" {
			if _, err := hd.Submit(ctx, entity, []byte("e1")); err != nil {
				t.Error(err)
			}
		}
		return Commit(hctx, Write{Cmd: "INCR", Keys: []string{count}, Done: func(any, error) { panic("boom") }})
	})
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if got := rc.Get(ctx, count).Val(); got != "2" {
		t.Errorf("counter = %q after two envelopes, want 2", got)
	}
}
