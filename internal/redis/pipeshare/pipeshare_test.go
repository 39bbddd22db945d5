package pipeshare_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/pipeshare"
	"github.com/junban/junban/internal/testenv"
)

// tripCounter counts the round trips a client makes for commands on keys of prefix: a
// single command or a pipeline is one.
type tripCounter struct {
	prefix string
	n      atomic.Int64
}

func (c *tripCounter) ours(cmds ...redis.Cmder) bool {
	return slices.ContainsFunc(cmds, func(cmd redis.Cmder) bool {
		return slices.ContainsFunc(cmd.Args(), func(a any) bool {
			s, ok := a.(string)
			return ok && strings.HasPrefix(s, c.prefix)
		})
	})
}

// slowScript keeps Redis busy for ms milliseconds: the round trip that carries it holds its
// slot while other commands arrive.
func slowScript(t *testing.T, rc redis.UniversalClient, ms int) *redis.Script {
	t.Helper()
	s := redis.NewScript(fmt.Sprintf(`local t = redis.call('TIME')
repeat local n = redis.call('TIME') until (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > %d
return 1`, ms*1000))
	if err := s.Load(context.Background(), rc).Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.ours(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.ours(cmds...) {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// clients returns a client with the hook installed and the round-trip counter of what
// reaches Redis (on exec, and on the hooked client itself).
func clients(t *testing.T, slots int) (redis.UniversalClient, *pipeshare.Hook, *tripCounter, string) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	exec, err := config.Redis{URL: testenv.RedisURL(t)}.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Close() })
	trips := &tripCounter{prefix: prefix}
	exec.AddHook(trips)
	h, err := pipeshare.Install(rc, exec, slots, 64, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc.AddHook(trips) // inside the pipeshare hook: counts what the hooked client still sends itself
	return rc, h, trips, prefix
}

// Single commands that arrive while a round trip is in flight share the next one: with a
// slow script holding the only slot, 30 callers' commands reach Redis in one pipeline, and
// each caller gets its own reply. Broken variant tried: a hook that passes each command
// on alone (ProcessHook returning next) never queues one, and this test, the next and the
// cancellation test fail ("waited 10s for the callers queued").
func TestConcurrentCommandsShareARoundTrip(t *testing.T) {
	rc, h, trips, prefix := clients(t, 1)
	ctx := context.Background()
	slow := slowScript(t, rc, 300)
	trips.n.Store(0)

	const callers = 30
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := slow.EvalSha(ctx, rc, []string{prefix + ":slow"}).Err(); err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })
	replies := make([]int64, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], _ = rc.IncrBy(ctx, prefix+":n:"+strconv.Itoa(i), int64(i)).Result()
		}()
	}
	testenv.WaitFor(t, 10*time.Second, "the callers queued", func() bool { return h.Waiting() == callers })
	wg.Wait()

	if got := trips.n.Load(); got != 2 {
		t.Errorf("%d round trips for 1 + %d commands, want 2", got, callers)
	}
	for i, r := range replies {
		if r != int64(i) {
			t.Fatalf("caller %d got %d: every caller must get its own reply", i, r)
		}
	}
}

// In a shared pipeline, a command's error or nil reply is its own: a WRONGTYPE, a missing
// key and a script error beside commands that succeed.
func TestRepliesAndErrorsStayWithTheirCommand(t *testing.T) {
	rc, h, trips, prefix := clients(t, 1)
	ctx := context.Background()
	if err := rc.RPush(ctx, prefix+":list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	slow := slowScript(t, rc, 300)
	trips.n.Store(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(ctx, rc, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })

	var wrongType, missing, scriptErr, set error
	for _, f := range []func(){
		func() { wrongType = rc.Get(ctx, prefix+":list").Err() },
		func() { missing = rc.Get(ctx, prefix+":none").Err() },
		func() {
			scriptErr = rc.Eval(ctx, "return redis.error_reply('NOPE here')", []string{prefix + ":k"}).Err()
		},
		func() { set = rc.Set(ctx, prefix+":k", "v", 0).Err() },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	testenv.WaitFor(t, 10*time.Second, "the four commands queued", func() bool { return h.Waiting() == 4 })
	wg.Wait()
	if n := trips.n.Load(); n != 2 {
		t.Errorf("%d round trips, want 2: the four commands were to share one", n)
	}
	got, err := rc.Get(ctx, prefix+":k").Result()

	if wrongType == nil || !redis.HasErrorPrefix(wrongType, "WRONGTYPE") {
		t.Errorf("GET of a list: %v, want WRONGTYPE", wrongType)
	}
	if !errors.Is(missing, redis.Nil) {
		t.Errorf("GET of a missing key: %v, want redis.Nil", missing)
	}
	if scriptErr == nil || !redis.HasErrorPrefix(scriptErr, "NOPE") {
		t.Errorf("script error: %v, want NOPE", scriptErr)
	}
	if set != nil || err != nil || got != "v" {
		t.Errorf("SET beside them: %v, then GET %q, %v", set, got, err)
	}
}

// Many callers at once, more than one pipeline holds: every command runs once, none is
// stranded, and nothing is left waiting. Run under the race detector by make test.
func TestEveryCallerIsServed(t *testing.T) {
	rc, h, _, prefix := clients(t, 2)
	ctx := context.Background()
	const callers, each = 50, 40
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := rc.Incr(ctx, prefix+":n").Err(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers stranded")
	}
	if n, _ := rc.Get(ctx, prefix+":n").Int(); n != callers*each {
		t.Errorf("counter %d, want %d", n, callers*each)
	}
	if w := h.Waiting(); w != 0 {
		t.Errorf("%d commands still waiting", w)
	}
}

// A hook that ran its pipelines on its own client would deadlock on a new connection's
// handshake (go-redis sends it through the client's hooks): Install refuses it.
func TestInstallRefusesTheHookedClient(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rc.Close()
	if _, err := pipeshare.Install(rc, rc, 1, 8, time.Second); !errors.Is(err, pipeshare.ErrSameClient) {
		t.Fatalf("Install(rc, rc): %v, want ErrSameClient", err)
	}
}

// A caller whose context ends while its command waits still gets the command's outcome:
// the pipeline runs whole (the leader's cancellation does not reach the others either).
func TestALeadersCancellationDoesNotFailTheOthers(t *testing.T) {
	rc, h, trips, prefix := clients(t, 1)
	slow := slowScript(t, rc, 200)
	leaderCtx, cancel := context.WithCancel(context.Background())
	trips.n.Store(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(leaderCtx, rc, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() >= 1 })
	var setErr error
	wg.Add(1)
	go func() { defer wg.Done(); setErr = rc.Set(context.Background(), prefix+":k", "v", 0).Err() }()
	testenv.WaitFor(t, 10*time.Second, "the SET queued", func() bool { return h.Waiting() == 1 })
	cancel()
	wg.Wait()
	if setErr != nil {
		t.Fatalf("SET behind a cancelled leader: %v", setErr)
	}
	if v, _ := rc.Get(context.Background(), prefix+":k").Result(); v != "v" {
		t.Fatalf("k = %q", v)
	}
}

// A command whose caller gave up while it waited is not sent: it fails with the context's
// error and writes nothing, as go-redis does with a command whose context has ended.
// Broken variant tried: an exec that sends every queued command sets the key and fails.
func TestACommandWhoseCallerGaveUpIsNotSent(t *testing.T) {
	rc, h, trips, prefix := clients(t, 1)
	slow := slowScript(t, rc, 200)
	trips.n.Store(0)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(context.Background(), rc, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	var setErr error
	wg.Add(1)
	go func() { defer wg.Done(); setErr = rc.Set(ctx, prefix+":k", "v", 0).Err() }()
	testenv.WaitFor(t, 10*time.Second, "the SET queued", func() bool { return h.Waiting() == 1 })
	cancel()
	wg.Wait()
	if !errors.Is(setErr, context.Canceled) {
		t.Errorf("SET whose caller gave up: %v, want context.Canceled", setErr)
	}
	if n, _ := rc.Exists(context.Background(), prefix+":k").Result(); n != 0 {
		t.Error("the SET was sent after its caller gave up")
	}
}

// A leader that finds nothing in flight yields once before it sends, so that the
// goroutines already runnable reach their own calls and share its batch: on one processor,
// ten callers started together make one batch, or now and then two (the scheduler looks at
// its global queue, where a yielding goroutine waits, every 61st time, for fairness, and
// may resume the leader before every caller has queued): 20-24 batches for 20 rounds.
// Broken variant tried: without the yield (runtime.Gosched in Do) every call was a batch
// of its own, 200 for 20 rounds.
func TestRunnableCallersJoinTheFirstBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds, callers = 20, 10
	var batches atomic.Int64
	b := pipeshare.New(1, 64, time.Second, func(context.Context, []int) { batches.Add(1) })
	for range rounds {
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() { defer wg.Done(); b.Do(context.Background(), i) }()
		}
		wg.Wait()
	}
	if n := batches.Load(); n > rounds*callers/4 {
		t.Errorf("%d batches for %d rounds of %d callers started together, want at most %d", n, rounds, callers, rounds*callers/4)
	}
}
