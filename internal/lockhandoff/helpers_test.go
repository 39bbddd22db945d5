package lockhandoff

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// backend is a Redis to run a test against: the stack's single node, or a local cluster.
type backend struct {
	name string
	// client returns a client and a key prefix of the test's own.
	client func(t *testing.T) (redis.UniversalClient, string)
	// env tells a helper subprocess how to connect.
	env func(t *testing.T) []string
}

var single = backend{
	name:   "single",
	client: func(t *testing.T) (redis.UniversalClient, string) { return testenv.Redis(t) },
	env:    func(t *testing.T) []string { return []string{helperRedisURL + "=" + testenv.RedisURL(t)} },
}

const (
	helperFlag        = "LOCKHANDOFF_HELPER"
	helperRedisURL    = "LOCKHANDOFF_HELPER_REDIS_URL"
	helperClusterSeed = "LOCKHANDOFF_HELPER_CLUSTER_SEED"
	helperPrefix      = "LOCKHANDOFF_HELPER_PREFIX"
	helperEntity      = "LOCKHANDOFF_HELPER_ENTITY"
)

// newTestHandoff builds a Handoff with a fresh metrics registry, short timings by default
// and the given overrides. Without cfg.Handler, its handler is h, with NeverQuarantine.
func newTestHandoff(t *testing.T, rc redis.UniversalClient, prefix string, cfg Config, h func(ctx context.Context, t Turn, envelope []byte) error) (*Handoff, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Prefix = prefix
	cfg.Registerer = reg
	if cfg.LockTTL == 0 {
		cfg.LockTTL = 2 * time.Second
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 50 * time.Millisecond
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = time.Millisecond
	}
	cfg.Redis = rc
	if cfg.Handler == nil {
		cfg.Handler, cfg.NeverQuarantine = steps(h), true
	}
	hd, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Stop(context.Background()) })
	return hd, reg
}

// steps is a Handler that never quarantines, of a step that returns no trims.
func steps(h func(ctx context.Context, t Turn, envelope []byte) error) StepFunc {
	return func(ctx context.Context, t Turn, envelope []byte) (Result, error) {
		return Result{}, h(ctx, t, envelope)
	}
}

// testHandler is a Handler of two test functions.
type testHandler struct {
	step       func(ctx context.Context, t Turn, envelope []byte) (Result, error)
	quarantine func(ctx context.Context, t Turn, envelope []byte, f Failure) error
}

func (h testHandler) Step(ctx context.Context, t Turn, envelope []byte) (Result, error) {
	return h.step(ctx, t, envelope)
}

func (h testHandler) Quarantine(ctx context.Context, t Turn, envelope []byte, f Failure) (Result, error) {
	return Result{}, h.quarantine(ctx, t, envelope, f)
}

// quarantining is a Handler of a step that returns no trims and a quarantine.
func quarantining(step func(ctx context.Context, t Turn, envelope []byte) error, q func(ctx context.Context, t Turn, envelope []byte, f Failure) error) Handler {
	return testHandler{step: steps(step), quarantine: q}
}

// recorder records handler calls in order.
type recorder struct {
	mu     sync.Mutex
	calls  []call
	notify chan struct{}
}

type call struct {
	turn     Turn
	envelope string
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) add(t Turn, env []byte) {
	r.mu.Lock()
	r.calls = append(r.calls, call{t, string(env)})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *recorder) envelopes() []string {
	var out []string
	for _, c := range r.snapshot() {
		out = append(out, c.envelope)
	}
	return out
}

// waitFor waits until the recorder holds n calls; the timeout only guards against a hang.
func (r *recorder) waitFor(t *testing.T, n int, guard time.Duration) []call {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		if c := r.snapshot(); len(c) >= n {
			return c
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			t.Fatalf("waited for %d handler calls, got %v", n, r.envelopes())
		}
	}
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "junban_lockhandoff_"+name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// snapshotKeys reads an entity's keys for before/after comparisons.
func snapshotKeys(t *testing.T, rc redis.UniversalClient, prefix, entity string) string {
	t.Helper()
	ctx := context.Background()
	k := keys{Key(prefix, entity, "lock"), Key(prefix, entity, "wait"), Key(prefix, entity, "proc"), Key(prefix, entity, "seq")}
	lock, _ := rc.Get(ctx, k.lock).Result()
	wait, _ := rc.LRange(ctx, k.wait, 0, -1).Result()
	proc, _ := rc.LRange(ctx, k.proc, 0, -1).Result()
	seq, _ := rc.Get(ctx, k.seq).Result()
	return fmt.Sprintf("lock=%q wait=%q proc=%q seq=%q", lock, wait, proc, seq)
}

// payloads strips the enqueue timestamps of raw wait/proc entries.
func payloads(raw []string) []string {
	out := make([]string, len(raw))
	for i, r := range raw {
		_, p, _ := strings.Cut(r, ":")
		out[i] = p
	}
	return out
}

func redisZ(ms int64, member string) redis.Z { return redis.Z{Score: float64(ms), Member: member} }

// opener closes c once, at the latest when the test ends. Call it after newTestHandoff so
// that its cleanup runs before Stop, which waits for handlers blocked on c.
func opener(t *testing.T, c chan struct{}) func() {
	var once sync.Once
	open := func() { once.Do(func() { close(c) }) }
	t.Cleanup(open)
	return open
}

// holdTurn submits e0 to entity with a handler that holds the turn on e0 until release is
// called; release returns e0's Submit error once the drain it runs is over.
func holdTurn(t *testing.T, rc redis.UniversalClient, prefix, entity string) (hd *Handoff, release func() error) {
	t.Helper()
	holding, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hd, _ = newTestHandoff(t, rc, prefix, Config{}, func(ctx context.Context, turn Turn, env []byte) error {
		if string(env) == "e0" {
			once.Do(func() { close(holding) })
			<-gate
		}
		return nil
	})
	open := opener(t, gate)
	holder := make(chan error, 1)
	go func() { _, err := hd.Submit(context.Background(), entity, []byte("e0")); holder <- err }()
	<-holding
	return hd, func() error { open(); return <-holder }
}
