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

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// 1,000 entities with concurrent producers: every event runs, per entity one at a time and
// in each producer's order, and one entity whose handler blocks does not hold up any other:
// its handler is released only once every other event has run.
//
// Broken variant tried: Key without the entity (every entity sharing one turn): the other
// entities queued behind the blocked one, the test hit its hang guard with 1001 of 4000
// events run.
func TestManyKeysNoCrossKeyBlocking(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const (
		keys      = 1000
		producers = 16
		perKey    = 4
		total     = keys * perKey
		blocked   = "LC-0"
	)
	var (
		mu        sync.Mutex
		ran       = map[string]int{}
		last      = map[string]int{} // entity/producer -> last n
		inFlight  = map[string]bool{}
		problems  []string
		othersRan = make(chan struct{})
		allRan    = make(chan struct{})
	)
	hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(ctx context.Context, turn Turn, env []byte) error {
		var e string
		var p, n int
		fmt.Sscanf(string(env), "%s %d %d", &e, &p, &n)
		mu.Lock()
		if inFlight[e] {
			problems = append(problems, "overlap on "+e)
		}
		inFlight[e] = true
		mu.Unlock()
		if e == blocked {
			select {
			case <-othersRan:
			case <-time.After(60 * time.Second): // hang guard
				mu.Lock()
				problems = append(problems, "the blocked entity held up the others")
				mu.Unlock()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		inFlight[e] = false
		ran[string(env)]++
		pk := fmt.Sprintf("%s/%d", e, p)
		if prev, ok := last[pk]; ok && prev >= n {
			problems = append(problems, fmt.Sprintf("%s ran %d after %d", pk, n, prev))
		}
		last[pk] = n
		if len(ran) == total-perKey {
			close(othersRan)
		}
		if len(ran) == total {
			close(allRan)
		}
		return nil
	})
	submit := func(e, p, n int) bool {
		env := fmt.Sprintf("LC-%d %d %d", e, p, n)
		if _, err := hd.Submit(context.Background(), fmt.Sprintf("LC-%d", e), []byte(env)); err != nil {
			t.Errorf("submit: %v", err)
			return false
		}
		return true
	}
	var wg sync.WaitGroup
	// The blocked entity has a producer of its own (its first Submit takes the turn and
	// blocks in the handler); producer p sends to the other entities e with e%producers == p.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := range perKey {
			if !submit(0, 0, n) {
				return
			}
		}
	}()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perKey {
				for e := p; e < keys; e += producers {
					if e != 0 && !submit(e, p, n) {
						return
					}
				}
			}
		}()
	}
	select {
	case <-allRan:
	case <-time.After(90 * time.Second): // hang guard
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != total {
		t.Errorf("%d of %d events ran", len(ran), total)
	}
	for env, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", env, n)
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d problems, first: %v", len(problems), problems[:min(5, len(problems))])
	}
}

// The drain budget: after DrainMaxEvents the turn is left (lock released, backlog kept)
// and Nudge is called; Resume from the nudge carries on in order.
func TestDrainBudgetLeavesAndNudges(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-budget"
	ctx := context.Background()
	rec := newRecorder()
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	nudged := make(chan string, 10)
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		DrainMaxEvents: 2,
		Nudge:          func(ctx context.Context, e string) error { nudged <- e; return nil },
	}, func(ctx context.Context, turn Turn, env []byte) error {
		rec.add(turn, env)
		if string(env) == "e0" {
			once.Do(func() { close(holding) })
			<-release
		}
		return nil
	})
	openRelease := opener(t, release)
	holder := make(chan struct{})
	go func() { hd.Submit(ctx, entity, []byte("e0")); close(holder) }()
	<-holding
	for _, e := range []string{"e1", "e2", "e3", "e4"} {
		if out, err := hd.Submit(ctx, entity, []byte(e)); err != nil || out != OutcomeQueued {
			t.Fatalf("%s: %v %v", e, out, err)
		}
	}
	openRelease()
	<-holder
	for i := 0; ; i++ {
		e := <-nudged
		if e != entity {
			t.Fatalf("nudged %q", e)
		}
		if err := hd.Resume(ctx, e); err != nil {
			t.Fatal(err)
		}
		if len(rec.snapshot()) == 5 {
			break
		}
		if i > 5 {
			t.Fatalf("too many nudges; ran %v", rec.envelopes())
		}
	}
	if got := strings.Join(rec.envelopes(), ","); got != "e0,e1,e2,e3,e4" {
		t.Errorf("ran %s", got)
	}
	if len(nudged) != 0 {
		t.Errorf("nudged after the backlog was empty")
	}
}

// Stop lets the running handler finish, then leaves the turn with the backlog in place
// and nudges; a later Resume (another replica) carries on.
func TestStopLeavesTurnAndNudges(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-stop"
	ctx := context.Background()
	rec := newRecorder()
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var nudges atomic.Int32
	handler := func(ctx context.Context, turn Turn, env []byte) error {
		rec.add(turn, env)
		if string(env) == "e0" {
			once.Do(func() { close(holding) })
			<-release
		}
		return nil
	}
	hd, _ := newTestHandoff(t, rc, prefix, Config{Nudge: func(context.Context, string) error { nudges.Add(1); return nil }}, handler)
	openRelease := opener(t, release)
	go hd.Submit(ctx, entity, []byte("e0"))
	<-holding
	hd.Submit(ctx, entity, []byte("e1"))
	stopped := make(chan struct{})
	go func() { _ = hd.Stop(context.Background()); close(stopped) }()
	select {
	case <-hd.stopping: // Stop closes it first thing
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("Stop did not begin")
	}
	openRelease()
	<-stopped
	if got := rec.envelopes(); strings.Join(got, ",") != "e0" {
		t.Errorf("ran %v before stopping", got)
	}
	if nudges.Load() != 1 {
		t.Errorf("nudges = %d", nudges.Load())
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[`) || !strings.Contains(s, `proc=[]`) {
		t.Errorf("after Stop: %s", s)
	}
	other, _ := newTestHandoff(t, rc, prefix, Config{}, handler)
	if err := other.Resume(ctx, entity); err != nil {
		t.Fatal(err)
	}
	if got := rec.envelopes(); strings.Join(got, ",") != "e0,e1" {
		t.Errorf("after Resume: %v", got)
	}
}

// A failing handler is retried inside the turn, then the turn is left with the envelope in
// proc (index entry kept); the sweeper re-runs it first once the handler recovers.
func TestHandlerErrorLeavesEnvelopeInProc(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-fail"
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	var attempts atomic.Int32
	rec := newRecorder()
	hd, reg := newTestHandoff(t, rc, prefix, Config{HandlerRetries: 2}, func(ctx context.Context, turn Turn, env []byte) error {
		if failing.Load() {
			attempts.Add(1)
			return errors.New("downstream unavailable")
		}
		rec.add(turn, env)
		return nil
	})
	out, err := hd.Submit(ctx, entity, []byte("e0"))
	if err != nil || out != OutcomeTurn {
		t.Fatalf("submit: %v %v (custody moved: a handler error is not the caller's)", out, err)
	}
	if attempts.Load() != 3 {
		t.Errorf("attempts = %d, want 1 + 2 retries", attempts.Load())
	}
	s := snapshotKeys(t, rc, prefix, entity)
	if !strings.Contains(s, `lock=""`) || !strings.Contains(s, `:e0"]`) {
		t.Fatalf("after failure: %s", s)
	}
	if n, _ := rc.ZScore(ctx, hd.indexShard(entity), entity).Result(); n == 0 {
		t.Errorf("no index entry for the failed backlog")
	}
	hd.Submit(ctx, entity, []byte("e1")) // takes the free turn, starts from proc, fails again
	failing.Store(false)
	st, err := hd.Sweep(ctx)
	if err != nil || st.Recovered != 1 {
		t.Fatalf("sweep: %+v %v", st, err)
	}
	calls := rec.snapshot()
	if len(calls) != 2 || calls[0].envelope != "e0" || !calls[0].turn.Rerun || calls[1].envelope != "e1" {
		t.Errorf("recovered %+v", calls)
	}
	if got := counter(t, reg, "handler_failures_total"); got != 2 {
		t.Errorf("handler_failures_total = %v", got)
	}
}

// The sweeper removes the index entry of an idle entity only if no push refreshed it since
// it was read; a refreshed entry stays (removing it could orphan a backlog).
//
// Broken variant tried: forget.lua removing the member without comparing its score: the
// refreshed entry was removed and the test failed.
func TestSweeperKeepsRefreshedIndexEntry(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	const entity = "LC-index"
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMilli())
	var refresh atomic.Bool
	var hd *Handoff
	hd, _ = newTestHandoff(t, rc, prefix, Config{
		Now: func() time.Time { return time.UnixMilli(clock.Load()) },
		Hooks: Hooks{BeforeForget: func(e string) {
			if refresh.Load() {
				// A push lands between the sweeper's look and its removal.
				rc.ZAdd(ctx, hd.indexShard(e), redisZ(clock.Load(), e))
			}
		}},
	}, func(context.Context, Turn, []byte) error { return nil })
	if _, err := hd.Submit(ctx, entity, []byte("e0")); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour.Milliseconds())
	refresh.Store(true)
	if st, err := hd.Sweep(ctx); err != nil || st.Forgotten != 0 {
		t.Fatalf("sweep with a refresh: %+v %v", st, err)
	}
	if _, err := rc.ZScore(ctx, hd.indexShard(entity), entity).Result(); err != nil {
		t.Fatalf("refreshed entry removed: %v", err)
	}
	clock.Add(time.Hour.Milliseconds())
	refresh.Store(false)
	if st, err := hd.Sweep(ctx); err != nil || st.Forgotten != 1 {
		t.Fatalf("sweep of an idle entity: %+v %v", st, err)
	}
	if n, _ := rc.Exists(ctx, hd.indexShard(entity)).Result(); n != 0 {
		t.Errorf("idle entry not removed")
	}
}

// The periodic sweeps look only at index entries older than IndexGrace: an entity pushed
// in the last moments costs them nothing, and once its entry is old they look at it (and
// forget it, idle). Sweep on demand still looks at every entry (the other sweeper tests).
//
// Broken variant tried: the periodic sweep looking at every entry (the code before): 20
// entities, each read by every pass (hundreds of state scripts here, and at a shop's rate
// two scripts an event, more Redis time than the events').
func TestPeriodicSweepLooksOnlyAtOldEntries(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	looks, scans := &atomic.Int64{}, &atomic.Int64{}
	rc.AddHook(sweepCounter{state: stateScript.Hash(), looks: looks, scans: scans})
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		SweepInterval: 10 * time.Millisecond,
		IndexGrace:    time.Minute,
		Now:           func() time.Time { return time.UnixMilli(clock.Load()) },
	}, func(context.Context, Turn, []byte) error { return nil })
	const n = 20
	for i := range n {
		if _, err := hd.Submit(ctx, fmt.Sprintf("LC-young-%d", i), []byte("e0")); err != nil {
			t.Fatal(err)
		}
	}
	if err := hd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Ten passes at least (a pass scans each of the 16 shards).
	testenv.WaitFor(t, 10*time.Second, "ten sweeps", func() bool { return scans.Load() >= 10*16 })
	if got := looks.Load(); got != 0 {
		t.Errorf("the periodic sweeps read %d states of entities pushed less than IndexGrace ago, want 0", got)
	}
	if got := indexEntries(t, rc, hd); got != n {
		t.Fatalf("index entries %d, want %d", got, n)
	}
	clock.Add((time.Minute + time.Second).Milliseconds())
	testenv.WaitFor(t, 10*time.Second, "old idle entries forgotten", func() bool { return indexEntries(t, rc, hd) == 0 })
	if looks.Load() < n {
		t.Errorf("old entries forgotten after %d looks, want %d at least", looks.Load(), n)
	}
}

// sweepCounter counts the sweeper's state scripts and index scans on a client.
type sweepCounter struct {
	state        string
	looks, scans *atomic.Int64
}

func (c sweepCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c sweepCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c sweepCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c sweepCounter) count(cmd redis.Cmder) {
	args := cmd.Args()
	switch {
	case cmd.Name() == "zscan":
		c.scans.Add(1)
	case cmd.Name() == "evalsha" && len(args) > 1 && args[1] == c.state,
		cmd.Name() == "eval" && len(args) > 1 && args[1] == stateSrc:
		c.looks.Add(1)
	}
}

// indexEntries counts the entries of hd's backlog index over its shards.
func indexEntries(t *testing.T, rc redis.UniversalClient, hd *Handoff) int64 {
	t.Helper()
	var n int64
	for shard := range hd.cfg.IndexShards {
		c, err := rc.ZCard(context.Background(), indexKey(hd.cfg.Prefix, shard)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

// An index entry whose state cannot be read costs the sweeper that entity only: an orphaned
// backlog in the same shard, on the same page, is still recovered. And an entity that
// cannot name its keys (a brace breaks the hash tag) is refused before anything is written.
//
// Broken variant tried: the sweep leaving the shard at the first unreadable state (the
// code before): nothing was recovered.
func TestSweeperGoesOnPastAnUnreadableEntity(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	ctx := context.Background()
	var ran atomic.Int64
	hd, _ := newTestHandoff(t, rc, prefix, Config{IndexShards: 1}, func(context.Context, Turn, []byte) error {
		ran.Add(1)
		return nil
	})
	// "bad": its proc is not a list, so the state script fails on it. "good": an envelope
	// left in proc by a holder that is gone.
	rc.ZAdd(ctx, hd.indexShard("bad"), redisZ(1, "bad"))
	rc.Set(ctx, Key(prefix, "bad", "proc"), "not a list", 0)
	rc.ZAdd(ctx, hd.indexShard("good"), redisZ(2, "good"))
	rc.RPush(ctx, Key(prefix, "good", "proc"), "1700000000000:e0")
	st, err := hd.Sweep(ctx)
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("sweep error %v, want one naming the unreadable entity", err)
	}
	if st.Recovered != 1 || ran.Load() != 1 {
		t.Errorf("recovered %d, handled %d; want the good entity's backlog", st.Recovered, ran.Load())
	}

	for _, e := range []string{"", "}x", "a{b"} {
		if _, err := hd.Submit(ctx, e, []byte("e")); !errors.Is(err, ErrInvalidEntity) {
			t.Errorf("Submit(%q): %v, want ErrInvalidEntity", e, err)
		}
		if err := hd.Resume(ctx, e); !errors.Is(err, ErrInvalidEntity) {
			t.Errorf("Resume(%q): %v, want ErrInvalidEntity", e, err)
		}
	}
	if n, _ := rc.ZCard(ctx, hd.indexShard("}x")).Result(); n != 2 {
		t.Errorf("the index holds %d entries, want the 2 of before: a refused entity wrote one", n)
	}
}
