package pipeshare_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/pipeshare"
	"github.com/junban/junban/internal/testenv"
)

// writeCounter counts what a client writes to Redis: one write a single command or a
// pipeline, one round trip. It counts at the connection, under go-redis.
type writeCounter struct{ n atomic.Int64 }

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Write(b []byte) (int, error) { c.n.Add(1); return c.Conn.Write(b) }

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

// clients returns a plain client, a pipeshare.Client of at most slots round trips in
// flight on a client of its own, and the counter of that client's writes to Redis, at 0
// with its connection open.
func clients(t *testing.T, slots int) (redis.UniversalClient, *pipeshare.Client, *writeCounter, string) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	trips := &writeCounter{}
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{conn, &trips.n}, nil
	}
	exec := redis.NewClient(opt)
	t.Cleanup(func() { exec.Close() })
	c := pipeshare.NewClient(exec, slots, 64, 5*time.Second)
	if err := c.Process(context.Background(), redis.NewStatusCmd(context.Background(), "ping")); err != nil {
		t.Fatal(err)
	}
	trips.n.Store(0) // the handshake's, and the PING's
	return rc, c, trips, prefix
}

func incrBy(ctx context.Context, c *pipeshare.Client, key string, n int) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "incrby", key, n)
	_ = c.Process(ctx, cmd)
	return cmd
}

// Single commands that arrive while a round trip is in flight share the next one: with a
// slow script holding the only slot, 30 callers' commands reach Redis in one write, and
// each caller gets its own reply. Broken variants tried: a Client whose Process sends each
// command alone on exec never queues one ("waited 10s for the callers queued", here and in
// the next test); one whose batches hold one command each made 31 writes (the next: 5).
func TestConcurrentCommandsShareARoundTrip(t *testing.T) {
	rc, c, trips, prefix := clients(t, 1)
	ctx := context.Background()
	slow := slowScript(t, rc, 300)

	const callers = 30
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := slow.EvalSha(ctx, c, []string{prefix + ":slow"}).Err(); err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })
	replies := make([]int64, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i], _ = incrBy(ctx, c, prefix+":n:"+strconv.Itoa(i), i).Result()
		}()
	}
	testenv.WaitFor(t, 10*time.Second, "the callers queued", func() bool { return c.Waiting() == callers })
	wg.Wait()

	if got := trips.n.Load(); got != 2 {
		t.Errorf("%d writes for 1 + %d commands, want 2", got, callers)
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
	rc, c, trips, prefix := clients(t, 1)
	ctx := context.Background()
	if err := rc.RPush(ctx, prefix+":list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	slow := slowScript(t, rc, 300)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(ctx, c, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })

	var wrongType, missing, scriptErr, set error
	for _, f := range []func(){
		func() { wrongType = c.Get(ctx, prefix+":list").Err() },
		func() { missing = c.Get(ctx, prefix+":none").Err() },
		func() {
			scriptErr = c.Eval(ctx, "return redis.error_reply('NOPE here')", []string{prefix + ":k"}).Err()
		},
		func() { set = c.Process(ctx, redis.NewStatusCmd(ctx, "set", prefix+":k", "v")) },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	testenv.WaitFor(t, 10*time.Second, "the four commands queued", func() bool { return c.Waiting() == 4 })
	wg.Wait()
	if n := trips.n.Load(); n != 2 {
		t.Errorf("%d writes, want 2: the four commands were to share one", n)
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
	rc, c, _, prefix := clients(t, 2)
	ctx := context.Background()
	const callers, each = 50, 40
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if err := incrBy(ctx, c, prefix+":n", 1).Err(); err != nil {
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
	if w := c.Waiting(); w != 0 {
		t.Errorf("%d commands still waiting", w)
	}
}

// A caller whose context ends while its command waits still gets the command's outcome:
// the pipeline runs whole (the leader's cancellation does not reach the others either).
func TestALeadersCancellationDoesNotFailTheOthers(t *testing.T) {
	rc, c, trips, prefix := clients(t, 1)
	slow := slowScript(t, rc, 200)
	leaderCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(leaderCtx, c, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })
	var setErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		setErr = c.Process(context.Background(), redis.NewStatusCmd(context.Background(), "set", prefix+":k", "v"))
	}()
	testenv.WaitFor(t, 10*time.Second, "the SET queued", func() bool { return c.Waiting() == 1 })
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
	rc, c, trips, prefix := clients(t, 1)
	slow := slowScript(t, rc, 200)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); slow.EvalSha(context.Background(), c, []string{prefix + ":slow"}) }()
	testenv.WaitFor(t, 10*time.Second, "the slow script in flight", func() bool { return trips.n.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	var setErr error
	wg.Add(1)
	go func() { defer wg.Done(); setErr = c.Process(ctx, redis.NewStatusCmd(ctx, "set", prefix+":k", "v")) }()
	testenv.WaitFor(t, 10*time.Second, "the SET queued", func() bool { return c.Waiting() == 1 })
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

// The commands junban's components send through a Client answer as the plain client's
// do: a script the server does not know yet runs through Script.Run's EVAL fallback
// (EVALSHA's NOSCRIPT comes back as the command's own error), and a ZSCAN's iterator
// fetches its later pages through the Client.
func TestCommandsAnswerAsOnAPlainClient(t *testing.T) {
	rc, c, trips, prefix := clients(t, 1)
	ctx := context.Background()

	fresh := redis.NewScript(fmt.Sprintf("return ARGV[1] .. '%s'", prefix)) // never loaded
	if got, err := fresh.Run(ctx, c, []string{prefix + ":s"}, "x").Text(); err != nil || got != "x"+prefix {
		t.Fatalf("Run of a script the server did not know: %q, %v", got, err)
	}
	if got, err := fresh.Run(ctx, c, []string{prefix + ":s"}, "y").Text(); err != nil || got != "y"+prefix {
		t.Fatalf("Run of the same script again: %q, %v", got, err)
	}

	zs := make([]redis.Z, 600)
	for i := range zs {
		zs[i] = redis.Z{Score: float64(i), Member: "m" + strconv.Itoa(i)}
	}
	if n, err := c.ZAdd(ctx, prefix+":z", zs...).Result(); err != nil || n != int64(len(zs)) {
		t.Fatalf("ZADD: %d, %v", n, err)
	}
	before := trips.n.Load()
	seen := map[string]bool{}
	it := c.ZScan(ctx, prefix+":z", 0, "", 100).Iterator()
	for it.Next(ctx) {
		seen[it.Val()] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2*len(zs) { // members and scores
		t.Errorf("ZSCAN's iterator saw %d members and scores, want %d", len(seen), 2*len(zs))
	}
	if pages := trips.n.Load() - before; pages < 2 {
		t.Errorf("ZSCAN's pages: %d round trips through the Client, want the iterator's later pages there too", pages)
	}

	if err := rc.HSet(ctx, prefix+":h", "a", "1", "b", "2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.RPush(ctx, prefix+":l", "p", "q", "r").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.HGet(ctx, prefix+":h", "b").Result(); err != nil || v != "2" {
		t.Errorf("HGET: %q, %v", v, err)
	}
	if m, err := c.HGetAll(ctx, prefix+":h").Result(); err != nil || len(m) != 2 || m["a"] != "1" {
		t.Errorf("HGETALL: %v, %v", m, err)
	}
	if n, err := c.LLen(ctx, prefix+":l").Result(); err != nil || n != 3 {
		t.Errorf("LLEN: %d, %v", n, err)
	}
	if l, err := c.LRange(ctx, prefix+":l", 1, -1).Result(); err != nil || !slices.Equal(l, []string{"q", "r"}) {
		t.Errorf("LRANGE: %v, %v", l, err)
	}
	if v, err := c.MGet(ctx, prefix+":none", prefix+":s").Result(); err != nil || len(v) != 2 || v[0] != nil {
		t.Errorf("MGET: %v, %v", v, err)
	}
	if ok, err := c.ScriptExists(ctx, fresh.Hash()).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after Run: %v, %v", ok, err)
	}
}
