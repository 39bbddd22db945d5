package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// twiceRig is a Handoff whose client reaches Redis through a testenv.ReplyDropper armed
// for one script, and whose steps each trim one element of the list mark.
type twiceRig struct {
	hd   *Handoff
	drop *testenv.ReplyDropper
	mark string
	mu   sync.Mutex
	seen []string
}

func newTwiceRig(t *testing.T, entity, scriptHash string, cfg Config) *twiceRig {
	t.Helper()
	direct, prefix := testenv.Redis(t)
	r := &twiceRig{mark: Key(prefix, entity, "mark")}
	fillList(t, direct, r.mark, 5)
	r.drop = testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(scriptHash))
	rc := testenv.RedisVia(t, r.drop.Addr())
	var log doneLog
	r.hd, _ = newTestHandoff(t, rc, prefix, trimming(cfg, &log, func(_ context.Context, tr Turn, env []byte) (Result, error) {
		r.mu.Lock()
		r.seen = append(r.seen, string(env))
		r.mu.Unlock()
		if string(env) == "e0" {
			if out, err := r.hd.Submit(context.Background(), entity, []byte("e1")); err != nil || out != OutcomeQueued {
				t.Errorf("e1: %v %v", out, err)
			}
		}
		return trimOf(t, tr, r.mark, 1), nil
	}), nil)
	return r
}

// check submits env, then requires the handlers to have run want and the list to have
// lost one element for each of them.
func (r *twiceRig) check(t *testing.T, entity, env string, want []string) {
	t.Helper()
	if _, err := r.hd.Submit(context.Background(), entity, []byte(env)); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	seen := slices.Clone(r.seen)
	r.mu.Unlock()
	if !slices.Equal(seen, want) {
		t.Fatalf("handlers ran %q, want %q", seen, want)
	}
	rc := r.hd.rc
	left, err := rc.LRange(context.Background(), r.mark, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var expect []string
	for i := len(want); i < 5; i++ {
		expect = append(expect, fmt.Sprint(i))
	}
	if !slices.Equal(left, expect) {
		t.Fatalf("after %d steps of one trim each, with one step's reply lost, the list is %q, want %q", len(want), left, expect)
	}
}

// A handoff whose reply is lost is sent again by the client: the second run finds the
// seq moved on (STALE) before it trims, so the handler's trim runs once; the next
// envelope, left in proc, runs once at the next Submit.
//
// Broken variant tried: handoff.lua running its trims before the seq check: the list lost
// two elements for e0's one trim.
func TestHandoffTwiceTrimsOnce(t *testing.T) {
	t.Parallel()
	const entity = "LC-twice-handoff"
	r := newTwiceRig(t, entity, handoffScript.Hash(), Config{HandlerRetries: -1})
	if _, err := r.hd.Submit(context.Background(), entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if r.drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", r.drop.Dropped())
	}
	r.check(t, entity, "e2", []string{"e0", "e1", "e2"})
}

// A leave whose reply is lost is sent again by the client: the second run finds the lock
// gone (LOST) before it trims, so the handler's trim runs once.
//
// Broken variant tried: leave.lua running its trims before the token check: the list lost
// two elements for e0's one trim.
func TestLeaveTwiceTrimsOnce(t *testing.T) {
	t.Parallel()
	const entity = "LC-twice-leave"
	r := newTwiceRig(t, entity, leaveScript.Hash(), Config{DrainMaxEvents: 1})
	if _, err := r.hd.Submit(context.Background(), entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if r.drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", r.drop.Dropped())
	}
	// One envelope a turn: the next Submit runs e1 from the backlog and leaves e2 queued.
	r.check(t, entity, "e2", []string{"e0", "e1"})
}

// A take whose reply is lost is sent again by the client: the second run finds the turn
// held by its own token and answers TURN again, without a second push: the envelope runs
// once.
//
// Broken variant tried: take.lua without its own-token check: the retry queued e0 behind
// the turn its first send took, and no handler ran.
func TestTakeTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	const entity = "LC-twice-take"
	r := newTwiceRig(t, entity, takeScript.Hash(), Config{HandlerRetries: -1})
	if _, err := r.hd.Submit(context.Background(), entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if r.drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", r.drop.Dropped())
	}
	r.check(t, entity, "e2", []string{"e0", "e1", "e2"})
}

// A take that queued and whose reply is lost is sent again by the client: the second run
// finds its push marker and answers QUEUED again, without a second push: the envelope is
// in wait once and its handler runs once.
//
// Broken variant tried: take.lua without the push marker's check: e1 was appended twice,
// and its handler ran twice ([e0 e1 e1 e2]).
func TestTakeThatQueuedTwiceQueuesOnce(t *testing.T) {
	t.Parallel()
	const entity = "LC-twice-queued"
	r := newTwiceRig(t, entity, takeScript.Hash(), Config{HandlerRetries: -1})
	isTake := testenv.ScriptCall(takeScript.Hash())
	r.drop.Arm(func(args []string) bool { return isTake(args) && slices.Contains(args, "e1") })
	if _, err := r.hd.Submit(context.Background(), entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	if r.drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", r.drop.Dropped())
	}
	r.check(t, entity, "e2", []string{"e0", "e1", "e2"})
}

// A resume whose reply is lost is sent again by the client: the second run finds the turn
// held by its own token and answers TURN again with the envelope the first moved to proc:
// the backlog runs once, in order.
//
// Broken variant tried: resume.lua without its own-token check: the retry answered BUSY,
// the resume ran nothing, and the next Submit queued behind a turn nobody held until its
// lease ran out.
func TestResumeTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	const entity = "LC-twice-resume"
	r := newTwiceRig(t, entity, resumeScript.Hash(), Config{HandlerRetries: -1})
	ctx := context.Background()
	k := r.hd.keys(entity)
	if err := r.hd.rc.RPush(ctx, k.wait, "1:e0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.hd.Resume(ctx, entity); err != nil {
		t.Fatal(err)
	}
	if r.drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", r.drop.Dropped())
	}
	r.check(t, entity, "e2", []string{"e0", "e1", "e2"})
}

// A failed run's count whose reply is lost is sent again by the client: the second run
// finds its own run id in the hash and counts nothing more, so a quarantine at
// JUNBAN_MAX_ATTEMPTS comes after that many failed runs, not fewer.
//
// Broken variant tried: attempts.lua without the run id's check: one failed run counted 2.
func TestAttemptsTwiceCountsOnce(t *testing.T) {
	t.Parallel()
	direct, prefix := testenv.Redis(t)
	drop := testenv.StartReplyDropper(t, testenv.RedisAddr(t), testenv.ScriptCall(attemptsScript.Hash()))
	rc := testenv.RedisVia(t, drop.Addr())
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(context.Context, Turn, []byte) error { return nil })
	ctx := context.Background()
	const entity, token, raw = "LC-twice-attempts", "tok-1", "1:e0"
	k := hd.keys(entity)
	if err := direct.Set(ctx, k.lock, token, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := direct.RPush(ctx, k.proc, raw).Err(); err != nil {
		t.Fatal(err)
	}
	l := &lease{h: hd, entity: entity, k: k, token: token}
	f, ok := hd.recordFailure(l, entry{raw: []byte(raw)}, errors.New("boom"))
	if !ok {
		t.Fatal("the failure was not counted")
	}
	if drop.Dropped() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", drop.Dropped())
	}
	n, err := direct.HGet(ctx, attemptsKey(prefix, entity), "n").Int()
	if err != nil {
		t.Fatal(err)
	}
	if f.Attempts != 1 || n != 1 {
		t.Fatalf("one failed run counted %d (answered %d), want 1", n, f.Attempts)
	}
	if f, _ := hd.recordFailure(l, entry{raw: []byte(raw)}, errors.New("boom")); f.Attempts != 2 {
		t.Fatalf("the next failed run answered %d, want 2", f.Attempts)
	}
}
