package lockhandoff

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestSubmitReadingReadsWithTheTake: a turn that starts on the submitted envelope gets the
// keys SubmitReading named, as they were when the turn was taken; a turn that a handoff
// brings, and a retry of a failed run, get nothing and must read for themselves.
func TestSubmitReadingReadsWithTheTake(t *testing.T) {
	rc, prefix := single.client(t)
	ctx := context.Background()
	const entity = "LC-READ"
	reads := func(id string) []string {
		return []string{Key(prefix, entity, "done:"+id), Key(prefix, entity, "state")}
	}
	release := make(chan struct{})
	var failed atomic.Bool
	rec := newRecorder()
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(ctx context.Context, tn Turn, env []byte) error {
		rec.add(tn, env)
		switch string(env) {
		case "e1":
			if err := rc.Set(ctx, Key(prefix, entity, "state"), "s1", 0).Err(); err != nil {
				return err
			}
		case "e2":
			<-release // e3 queues behind e2 meanwhile
		case "e4":
			if !failed.Swap(true) {
				return errors.New("first run fails")
			}
		}
		return nil
	})
	if err := rc.Set(ctx, Key(prefix, entity, "state"), "s0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, Key(prefix, entity, "done:e2"), "r2", 0).Err(); err != nil {
		t.Fatal(err)
	}

	submit := func(id string, want Outcome) {
		t.Helper()
		out, err := hd.SubmitReading(ctx, entity, []byte(id), reads(id))
		if err != nil || out != want {
			t.Fatalf("submit %s: %v, %v; want %v", id, out, err, want)
		}
	}
	submit("e1", OutcomeTurn)
	go func() {
		// e3 is submitted while e2 holds the turn: it queues, and a handoff brings it.
		rec.waitFor(t, 2, 5*time.Second)
		submit("e3", OutcomeQueued)
		close(release)
	}()
	submit("e2", OutcomeTurn)
	rec.waitFor(t, 3, 5*time.Second)
	submit("e4", OutcomeTurn)
	calls := rec.waitFor(t, 5, 5*time.Second)

	want := []struct {
		env  string
		vals []any // nil: no Read
	}{
		{"e1", []any{nil, "s0"}},
		{"e2", []any{"r2", "s1"}}, // e1's handler wrote s1: read when e2 took the turn
		{"e3", nil},               // brought by the handoff
		{"e4", []any{nil, "s1"}},
		{"e4", nil}, // the retry reads afresh: its first run may have written
	}
	for i, w := range want {
		c := calls[i]
		if c.envelope != w.env {
			t.Fatalf("call %d ran %s, want %s (all: %v)", i, c.envelope, w.env, rec.envelopes())
		}
		switch {
		case w.vals == nil && c.turn.Read != nil:
			t.Errorf("%s (call %d): Read %+v, want none", w.env, i, *c.turn.Read)
		case w.vals != nil && c.turn.Read == nil:
			t.Errorf("%s (call %d): no Read, want %v", w.env, i, w.vals)
		case w.vals != nil && (!slices.Equal(c.turn.Read.Keys, reads(w.env)) || !slices.Equal(c.turn.Read.Vals, w.vals)):
			t.Errorf("%s (call %d): Read %+v, want keys %v values %v", w.env, i, *c.turn.Read, reads(w.env), w.vals)
		}
	}
}

// TestSubmitReadingRefusesAnotherEntitysKey: a read key outside the entity (another slot on
// a cluster, or another entity's data) is refused before anything is written.
func TestSubmitReadingRefusesAnotherEntitysKey(t *testing.T) {
	rc, prefix := single.client(t)
	ctx := context.Background()
	rec := newRecorder()
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(_ context.Context, tn Turn, env []byte) error {
		rec.add(tn, env)
		return nil
	})
	for _, key := range []string{Key(prefix, "LC-OTHER", "state"), prefix + ":LC-A:state", "state"} {
		_, err := hd.SubmitReading(ctx, "LC-A", []byte("e1"), []string{Key(prefix, "LC-A", "state"), key})
		if err == nil {
			t.Errorf("read of %q: no error", key)
		}
	}
	k := hd.keys("LC-A")
	if n, err := rc.Exists(ctx, k.lock, k.proc, k.wait).Result(); err != nil || n != 0 {
		t.Fatalf("refused submits wrote %d of lock, proc, wait (%v)", n, err)
	}
	if len(rec.snapshot()) != 0 {
		t.Fatalf("handler ran: %v", rec.envelopes())
	}
}
