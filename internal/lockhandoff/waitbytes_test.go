package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// waitBytesAgree fails the test unless the entity's byte count is the sum of its wait
// entries' lengths, with no key at all when wait is empty.
func waitBytesAgree(t *testing.T, rc redis.UniversalClient, k keys, when string) int64 {
	t.Helper()
	ctx := context.Background()
	entries, err := rc.LRange(ctx, k.wait, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range entries {
		sum += int64(len(e))
	}
	got, err := rc.Get(ctx, k.waitBytes()).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		if sum != 0 {
			t.Errorf("%s: no byte count, wait holds %d bytes", when, sum)
		}
	case err != nil:
		t.Fatal(err)
	case len(entries) == 0:
		t.Errorf("%s: byte count %d left with wait empty", when, got)
	case got != sum:
		t.Errorf("%s: byte count %d, wait holds %d bytes", when, got, sum)
	}
	return sum
}

// Every script that moves an entry into or out of wait keeps the byte count: take
// (queued, and a turn taken over a backlog), handoff and resume; it is gone once wait is.
//
// Broken variants tried: handoff.lua without its DECRBY (the count stayed at the moved
// entry's bytes after the handoff); resume.lua without it (the same after the resume);
// take.lua without the DECRBY of the entry it moves to proc over a backlog.
func TestWaitBytesFollowEveryScript(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(context.Context, Turn, []byte) error { return nil })
	ctx := context.Background()
	const entity = "LC-bytes"
	k := hd.keys(entity)

	first, err := hd.takeAndIndex(ctx, entity, k, "tok-a", []byte("e0"))
	if err != nil || first.status != statusTurn {
		t.Fatalf("take e0: %+v %v", first, err)
	}
	for i, e := range []string{"e1", strings.Repeat("x", 300), "e3"} {
		// Each take its own token, as Submit's are: a take's token names its push.
		if r, err := hd.takeAndIndex(ctx, entity, k, fmt.Sprint("tok-b", i), []byte(e)); err != nil || r.status != statusQueued {
			t.Fatalf("take %.5s: %+v %v", e, r, err)
		}
		waitBytesAgree(t, rc, k, "after a queued take")
	}
	// The holder finishes e0: e1 moves to proc.
	next, more, err := hd.runHandoff(ctx, k, "tok-a", first.first.seq, nil)
	if err != nil || !more {
		t.Fatalf("handoff: %v %v", more, err)
	}
	waitBytesAgree(t, rc, k, "after a handoff")
	// The holder leaves with e1 done and the rest waiting; a resume moves the next one.
	if _, err := hd.runLeave(ctx, k, "tok-a", true, nil); err != nil {
		t.Fatal(err)
	}
	res, ok, err := hd.runResume(ctx, k, "tok-c")
	if err != nil || !ok || res.rerun {
		t.Fatalf("resume: %+v %v %v", res, ok, err)
	}
	waitBytesAgree(t, rc, k, "after a resume")
	// The resumer leaves with its envelope done: a take finds the turn free and a backlog,
	// queues behind it and moves the oldest to proc.
	if _, err := hd.runLeave(ctx, k, "tok-c", true, nil); err != nil {
		t.Fatal(err)
	}
	r, err := hd.takeAndIndex(ctx, entity, k, "tok-d", []byte("e4"))
	if err != nil || r.status != statusTurn {
		t.Fatalf("take over a backlog: %+v %v", r, err)
	}
	waitBytesAgree(t, rc, k, "after a take over a backlog")
	seq := r.first.seq
	for {
		next, more, err = hd.runHandoff(ctx, k, "tok-d", seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitBytesAgree(t, rc, k, "while draining")
		if !more {
			break
		}
		seq = next.seq
	}
	if n := rc.Exists(ctx, k.waitBytes()).Val(); n != 0 {
		t.Error("the byte count outlived the wait list")
	}
}

// With the wait list at its byte bound, a take answers FULL and writes nothing; once the
// list drains, the same envelope is taken, and the count is gone with the list.
//
// Broken variant tried: take.lua without the byte check: the fourth envelope was queued.
func TestWaitAtItsByteBoundAnswersFull(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-bytes-full"
	ctx := context.Background()
	env := func(c string) []byte { return []byte(strings.Repeat(c, 100)) }
	// An entry is "<13-digit ms>:<envelope>": 114 bytes; three fit, a fourth does not.
	hdBound, reg := newTestHandoff(t, rc, prefix, Config{MaxWaitBytes: 3 * 114}, func(context.Context, Turn, []byte) error { return nil })
	hd, release := holdTurn(t, rc, prefix, entity)
	for _, c := range []string{"a", "b", "c"} {
		if out, err := hdBound.Submit(ctx, entity, env(c)); out != OutcomeQueued || err != nil {
			t.Fatalf("%s: %v %v", c, out, err)
		}
	}
	k := hd.keys(entity)
	if n := waitBytesAgree(t, rc, k, "at the bound"); n != 3*114 {
		t.Fatalf("wait holds %d bytes, want %d", n, 3*114)
	}
	before := snapshotKeys(t, rc, prefix, entity)
	out, err := hdBound.Submit(ctx, entity, env("d"))
	if out != OutcomeFull || !errors.Is(err, ErrQueueFull) {
		t.Fatalf("submit beyond the byte bound: %v %v", out, err)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("FULL changed the entity:\n before %s\n after  %s", before, after)
	}
	waitBytesAgree(t, rc, k, "after FULL")
	if got := counter(t, reg, "full_total"); got != 1 {
		t.Errorf("full_total = %v", got)
	}
	// A smaller envelope still fits under the count bound but not under the byte bound.
	if out, _ := hdBound.Submit(ctx, entity, []byte("e")); out != OutcomeFull {
		t.Errorf("a 15-byte entry over a full byte bound: %v", out)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	waitBytesAgree(t, rc, k, "after the drain")
	if n := rc.Exists(ctx, k.waitBytes()).Val(); n != 0 {
		t.Error("the byte count outlived the drain")
	}
	if out, err := hdBound.Submit(ctx, entity, env("d")); out != OutcomeTurn || err != nil {
		t.Fatalf("the refused envelope, sent again after the drain: %v %v", out, err)
	}
}

// A count that drifted (an entry removed by hand, a count from before an upgrade) is
// harmless: below zero it is read as zero, and with wait empty it starts again.
//
// Broken variant tried: take.lua trusting the count when wait is empty: the planted
// count refused the first take.
func TestDriftedWaitBytesAreHarmless(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-bytes-drift"
	ctx := context.Background()
	hdBound, _ := newTestHandoff(t, rc, prefix, Config{MaxWaitBytes: 1000}, func(context.Context, Turn, []byte) error { return nil })
	hd, release := holdTurn(t, rc, prefix, entity)
	k := hd.keys(entity)
	// wait is empty: a planted count is ignored and replaced.
	rc.Set(ctx, k.waitBytes(), 1<<40, 0)
	if out, err := hdBound.Submit(ctx, entity, []byte("e1")); out != OutcomeQueued || err != nil {
		t.Fatalf("a take over a drifted count with wait empty: %v %v", out, err)
	}
	waitBytesAgree(t, rc, k, "after the reset")
	// A count below zero is read as zero, and the next move out of wait does not take it
	// further down.
	rc.Set(ctx, k.waitBytes(), -5000, 0)
	if out, err := hdBound.Submit(ctx, entity, []byte("e2")); out != OutcomeQueued || err != nil {
		t.Fatalf("a take over a negative count: %v %v", out, err)
	}
	if n, _ := rc.Get(ctx, k.waitBytes()).Int64(); n < 0 {
		t.Errorf("count %d after a push", n)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	if n := rc.Exists(ctx, k.waitBytes()).Val(); n != 0 {
		t.Error("the byte count outlived the drain")
	}
}
