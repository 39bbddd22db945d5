package lockhandoff

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The core suite runs against the stack's Redis here and against a local 3-master Redis
// Cluster in cluster_test.go.

func TestOneKeyNoOverlapExactlyOnceInOrder(t *testing.T) {
	t.Parallel()
	testOneKey(t, single, 32, 200, 0)
}

// The same with turns that go on in the background after their Submit returned.
func TestOneKeyDetachedNoOverlapExactlyOnceInOrder(t *testing.T) {
	t.Parallel()
	testOneKey(t, single, 32, 200, 8)
}

func TestCrashedHolderRecoveredBySweeper(t *testing.T) {
	t.Parallel()
	testCrashRecovery(t, single)
}

func TestFullLeavesListUnchanged(t *testing.T) {
	t.Parallel()
	testFull(t, single)
}

func TestWrongTokenChangesNothing(t *testing.T) {
	t.Parallel()
	testWrongToken(t, single)
}

// testOneKey: producers x events on one entity. The handler never runs twice at once
// (overlap detected with a CAS), every event runs exactly once, and each producer's events
// run in its send order. A small drain budget makes turns leave and resume via Nudge.
// detached is Config.Detached.
//
// Broken variant tried: handoff.lua deleting the lock instead of renewing it when it moves
// the next envelope (a handoff that releases and carries on as if it had re-acquired):
// concurrent Submits took the free turn with the backlog, events ran twice ("event 26/0
// ran 2 times") and holders lost their turns until only 228 of 6400 events had run.
func testOneKey(t *testing.T, b backend, producers, events, detached int) {
	rc, prefix := b.client(t)
	const entity = "LC-hot"
	total := producers * events
	var (
		inFlight atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		seen     = map[string]int{}
		order    = make([][]int, producers)
		done     = make(chan struct{})
		nudges   sync.WaitGroup
	)
	var hd *Handoff
	cfg := Config{
		DrainMaxEvents: 50,
		Detached:       detached,
		Nudge: func(ctx context.Context, e string) error {
			nudges.Add(1)
			go func() {
				defer nudges.Done()
				if err := hd.Resume(context.Background(), e); err != nil {
					t.Errorf("resume: %v", err)
				}
			}()
			return nil
		},
	}
	hd, reg := newTestHandoff(t, rc, prefix, cfg, func(ctx context.Context, turn Turn, env []byte) error {
		if !inFlight.CompareAndSwap(0, 1) {
			overlaps.Add(1)
		}
		defer inFlight.Add(-1)
		var p, n int
		fmt.Sscanf(string(env), "%d/%d", &p, &n)
		mu.Lock()
		seen[string(env)]++
		order[p] = append(order[p], n)
		if len(seen) == total {
			close(done)
		}
		mu.Unlock()
		return nil
	})

	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range events {
				if _, err := hd.Submit(context.Background(), entity, fmt.Appendf(nil, "%d/%d", p, n)); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // guard against a hang, not a timing assertion
		mu.Lock()
		t.Errorf("only %d of %d events ran", len(seen), total)
		mu.Unlock()
	}
	// A detached turn may still be releasing; a nudge it sent may resume (and find nothing).
	<-hd.Idle()
	nudges.Wait()
	<-hd.Idle()

	if n := overlaps.Load(); n > 0 {
		t.Errorf("handler ran concurrently %d times", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for env, n := range seen {
		if n != 1 {
			t.Errorf("event %s ran %d times", env, n)
		}
	}
	for p, ns := range order {
		for i, n := range ns {
			if i != n {
				t.Errorf("producer %d: events ran in order %v", p, ns)
				break
			}
		}
	}
	if got := counter(t, reg, "handoffs_total"); got == 0 {
		t.Errorf("no handoff happened: the test did not exercise contention")
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[] proc=[]`) {
		t.Errorf("entity not idle at the end: %s", s)
	}
}

// testCrashRecovery: a holder in a subprocess takes the turn, queued events pile up behind
// it, it is SIGKILLed mid-handler without handing off. After the lock's TTL the sweeper
// takes the turn, re-runs proc first (with a higher seq), then drains wait in order.
//
// Broken variants tried: a wait list given the lock's TTL in take.lua (PEXPIRE wait ttl):
// the queued events expired with the lock and the sweeper recovered only e0; resume.lua
// moving from wait before looking at proc: e1..e5 ran and e0 was lost; the index ZADD
// left out of Submit's pipeline: the sweeper found nothing and no event was recovered.
func testCrashRecovery(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	entity := "LC-crash"
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), append(b.env(t), helperFlag+"=1", helperPrefix+"="+prefix, helperEntity+"="+entity)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	childSeq, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "HOLDING ")), 10, 64)
	if err != nil {
		t.Fatalf("helper said %q", line)
	}

	rec := newRecorder()
	hd, reg := newTestHandoff(t, rc, prefix, Config{LockTTL: 500 * time.Millisecond}, func(ctx context.Context, turn Turn, env []byte) error {
		rec.add(turn, env)
		return nil
	})
	want := []string{"e0"}
	for i := 1; i <= 5; i++ {
		e := "e" + strconv.Itoa(i)
		want = append(want, e)
		out, err := hd.Submit(ctx, entity, []byte(e))
		if err != nil || out != OutcomeQueued {
			t.Fatalf("submit %s behind the child: %v %v", e, out, err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true

	if err := hd.Start(ctx); err != nil {
		t.Fatal(err)
	}
	calls := rec.waitFor(t, len(want), 30*time.Second)
	if got := rec.envelopes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("recovered in order %v, want %v", got, want)
	}
	if !calls[0].turn.Rerun || calls[0].turn.Seq <= childSeq {
		t.Errorf("re-run of proc: %+v, child's seq %d", calls[0].turn, childSeq)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].turn.Seq <= calls[i-1].turn.Seq {
			t.Errorf("seq not increasing: %+v after %+v", calls[i].turn, calls[i-1].turn)
		}
	}
	if err := hd.Stop(context.Background()); err != nil {
		t.Error(err)
	}
	if got := counter(t, reg, "backlogs_recovered_total"); got < 1 {
		t.Errorf("backlogs_recovered_total = %v", got)
	}
	if s := snapshotKeys(t, rc, prefix, entity); !strings.Contains(s, `lock="" wait=[] proc=[]`) {
		t.Errorf("entity not idle at the end: %s", s)
	}
}

// TestHelperProcess is the crashing holder of testCrashRecovery, run as a subprocess: it
// takes the turn for e0, says so, and hangs in the handler until it is killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperFlag) != "1" {
		t.Skip("subprocess of testCrashRecovery")
	}
	var rc redis.UniversalClient
	if seed := os.Getenv(helperClusterSeed); seed != "" {
		rc = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}})
	} else {
		opt, err := redis.ParseURL(os.Getenv(helperRedisURL))
		if err != nil {
			t.Fatal(err)
		}
		rc = redis.NewClient(opt)
	}
	hd, err := New(Config{Redis: rc, Prefix: os.Getenv(helperPrefix), LockTTL: 500 * time.Millisecond, NeverQuarantine: true, Handler: steps(func(ctx context.Context, turn Turn, env []byte) error {
		fmt.Printf("HOLDING %d\n", turn.Seq)
		select {}
	})})
	if err != nil {
		t.Fatal(err)
	}
	hd.Submit(context.Background(), os.Getenv(helperEntity), []byte("e0"))
}

// testFull: with the wait list at its bound, Submit answers ErrQueueFull and the list is
// exactly as before.
//
// Broken variant tried: take.lua pushing first and answering FULL when the new length
// is above the bound: the refused envelope stayed in the list and the snapshot
// comparison failed.
func testFull(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	const entity = "LC-full"
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hd, reg := newTestHandoff(t, rc, prefix, Config{MaxWait: 3}, func(ctx context.Context, turn Turn, env []byte) error {
		if string(env) == "e0" {
			once.Do(func() { close(holding) })
			<-release
		}
		return nil
	})
	openRelease := opener(t, release)
	holder := make(chan error, 1)
	go func() { _, err := hd.Submit(ctx, entity, []byte("e0")); holder <- err }()
	<-holding
	for i := 1; i <= 3; i++ {
		if out, err := hd.Submit(ctx, entity, []byte("e"+strconv.Itoa(i))); out != OutcomeQueued || err != nil {
			t.Fatalf("e%d: %v %v", i, out, err)
		}
	}
	before := snapshotKeys(t, rc, prefix, entity)
	out, err := hd.Submit(ctx, entity, []byte("e4"))
	if out != OutcomeFull || !errors.Is(err, ErrQueueFull) {
		t.Errorf("submit beyond the bound: %v %v", out, err)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("FULL changed the entity:\n before %s\n after  %s", before, after)
	}
	if got := counter(t, reg, "full_total"); got != 1 {
		t.Errorf("full_total = %v", got)
	}
	openRelease()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
}

// testWrongToken: handoff, leave and renew with a token that is not the holder's change
// nothing, and say so.
//
// Broken variants tried: handoff.lua without its GET lock == token check: the wrong-token
// handoff cleared proc and moved e1 into it, and the snapshot comparison failed; trims.lua
// run before that check: the fenced list was trimmed.
func testWrongToken(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	const entity = "LC-token"
	ctx := context.Background()
	hd, release := holdTurn(t, rc, prefix, entity)
	if _, err := hd.Submit(ctx, entity, []byte("e1")); err != nil {
		t.Fatal(err)
	}
	k := hd.keys(entity)
	// A trim returned with the step (see Trim) is fenced by the same check.
	fenced := Key(prefix, entity, "fenced")
	if err := rc.RPush(ctx, fenced, "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	before := snapshotKeys(t, rc, prefix, entity)
	w := []Trim{{Key: fenced, N: 1}}
	if _, more, err := hd.runHandoff(ctx, k, "not-the-token", 1, w); !errors.Is(err, errLeaseLost) || more {
		t.Errorf("handoff with a wrong token: %v %v, want errLeaseLost", more, err)
	}
	for _, done := range []bool{false, true} {
		if n, err := hd.runLeave(ctx, k, "not-the-token", done, w); !errors.Is(err, errLeaseLost) {
			t.Errorf("leave(done=%v) with a wrong token: %v %v, want errLeaseLost", done, n, err)
		}
	}
	if n := rc.LLen(ctx, fenced).Val(); n != 2 {
		t.Errorf("a trim committed with a wrong token's step ran: %d elements left, want 2", n)
	}
	if ok, err := hd.runRenew(ctx, k, "not-the-token"); err != nil || ok {
		t.Errorf("renew with a wrong token: %v %v", ok, err)
	}
	if after := snapshotKeys(t, rc, prefix, entity); after != before {
		t.Errorf("a wrong token changed the entity:\n before %s\n after  %s", before, after)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}
