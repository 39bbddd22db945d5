package lockhandoff

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// go-redis sends a command or a pipeline again after EOF or a read timeout, so a script
// whose reply was lost can run twice. These tests send each turn script twice.

func TestHandoffSentAgainChangesNothing(t *testing.T) {
	t.Parallel()
	testHandoffSentAgain(t, single)
}

// A handoff sent again, as the client does when a round trip's reply is lost (go-redis
// retries after EOF or a read timeout), must not finish the next envelope before it ran,
// nor commit the trims twice: the script checks the seq of the envelope it finishes.
//
// Broken variant tried: handoff.lua without the seq check: the second send deleted e1 from
// proc unrun, moved e2 there, and trimmed the list twice.
func testHandoffSentAgain(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-resent"
	hd, release := holdTurn(t, rc, prefix, entity)
	for _, e := range []string{"e1", "e2"} {
		if _, err := hd.Submit(ctx, entity, []byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	k := hd.keys(entity)
	token := rc.Get(ctx, k.lock).Val()
	seq, _ := rc.Get(ctx, k.seq).Int64()
	list := Key(prefix, entity, "list")
	if err := rc.RPush(ctx, list, "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	w := []Trim{{Key: list, N: 1}}
	next, more, err := hd.runHandoff(ctx, k, token, seq, w)
	if err != nil || !more || string(next.envelope) != "e1" {
		t.Fatalf("first handoff: %v %q %v", more, next.envelope, err)
	}
	before := snapshotKeys(t, rc, prefix, entity)
	_, more, err = hd.runHandoff(ctx, k, token, seq, w)
	if !errors.Is(err, errStaleStep) || more {
		t.Errorf("the same handoff sent again: %v %v, want stale", more, err)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("the handoff sent again changed the entity:\n before %s\n after  %s", before, after)
	}
	if got := rc.LLen(ctx, list).Val(); got != 2 {
		t.Errorf("the committed trim ran %d times", 3-got)
	}
	if err := release(); err != nil { // e0's own handoff finds the seq moved on: stale, the turn is left
		t.Fatal(err)
	}
	if got := payloads(rc.LRange(ctx, k.proc, 0, -1).Val()); !slices.Equal(got, []string{"e1"}) {
		t.Errorf("proc = %q, want e1 kept for a re-run", got)
	}
}

// A take or a resume sent again after its reply was lost finds its own token in lock:
// it answers TURN again, with the envelope in proc as a re-run, and writes nothing.
//
// Broken variant tried: take.lua without the own-token answer: the second send pushed the
// envelope to wait a second time and answered QUEUED, leaving a held turn that nobody
// drains until its lease expires.
func TestTakeSentAgainAnswersTurn(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(context.Context, Turn, []byte) error { return nil })
	const entity = "LC-take-again"
	k := hd.keys(entity)
	token := newToken()
	first, err := hd.takeAndIndex(ctx, entity, k, token, []byte("e0"))
	if err != nil || first.status != statusTurn {
		t.Fatalf("first take: %+v %v", first, err)
	}
	before := snapshotKeys(t, rc, prefix, entity)
	again, err := hd.takeAndIndex(ctx, entity, k, token, []byte("e0"))
	if err != nil || again.status != statusTurn || string(again.first.envelope) != "e0" || again.first.seq != first.first.seq || !again.first.rerun {
		t.Errorf("take sent again: %+v %v, want TURN on e0, seq %d, rerun", again, err, first.first.seq)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("the take sent again changed the entity:\n before %s\n after  %s", before, after)
	}

	// Resume: leave the turn with e0 in proc, resume twice with one token.
	if n, err := hd.runLeave(ctx, k, token, false, nil); err != nil || n != 1 {
		t.Fatalf("leave: %d %v", n, err)
	}
	token2 := newToken()
	e, ok, err := hd.runResume(ctx, k, token2)
	if err != nil || !ok || string(e.envelope) != "e0" {
		t.Fatalf("resume: %+v %v %v", e, ok, err)
	}
	before = snapshotKeys(t, rc, prefix, entity)
	e2, ok, err := hd.runResume(ctx, k, token2)
	if err != nil || !ok || string(e2.envelope) != "e0" || e2.seq != e.seq || !e2.rerun {
		t.Errorf("resume sent again: %+v %v %v, want TURN on e0, seq %d", e2, ok, err, e.seq)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("the resume sent again changed the entity:\n before %s\n after  %s", before, after)
	}
}

// A handoff that finds its step already done (an earlier send of it ran, its reply lost)
// leaves the turn and nudges another replica: the next envelope is in proc already, and
// should not wait for the sweeper.
//
// Broken variant tried: leaving without a nudge after STALE (the code before): no nudge.
func TestStaleHandoffNudges(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	const entity = "LC-stale-nudge"
	nudged := make(chan string, 4)
	var (
		turn    Turn
		hd      *Handoff
		resent  atomic.Bool
		running = make(chan struct{}, 1) // e0's handler runs: e0 is in proc
		release = make(chan struct{})
	)
	hd, _ = newTestHandoff(t, rc, prefix, Config{
		Nudge: func(_ context.Context, e string) error { nudged <- e; return nil },
		Hooks: Hooks{BeforeStep: func(string) {
			if resent.CompareAndSwap(false, true) {
				// The first send of this step ran; only its reply was lost.
				if _, more, err := hd.runHandoff(ctx, hd.keys(entity), turn.Token, turn.Seq, nil); err != nil || !more {
					t.Errorf("first send of the handoff: %v %v", more, err)
				}
			}
		}},
	}, func(_ context.Context, tn Turn, env []byte) error {
		if string(env) == "e0" {
			turn = tn
			select {
			case running <- struct{}{}:
			default:
			}
			<-release
		}
		return nil
	})
	done := make(chan struct{})
	go func() { hd.Submit(ctx, entity, []byte("e0")); close(done) }()
	select {
	case <-running:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("e0's handler never ran")
	}
	if out, err := hd.Submit(ctx, entity, []byte("e1")); err != nil || out != OutcomeQueued {
		t.Fatalf("e1: %v %v", out, err)
	}
	close(release)
	<-done
	select {
	case e := <-nudged:
		if e != entity {
			t.Errorf("nudged %q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no nudge after the stale handoff")
	}
}
