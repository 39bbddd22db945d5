package replication_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/replication"
	"github.com/junban/junban/internal/testenv"
)

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A write waits for its replica on its own connection: with the replica up, WAIT reports
// it; stopped, the write is short, counted, and readiness fails only once it has been
// short for longer than ReadyAfter; the next acknowledged write makes it pass again.
//
// Broken variant tried: Ready looking at the last answer alone (it failed at once, on the
// first short write).
func TestShortWritesCountAndFailReadinessAfterAWhile(t *testing.T) {
	t.Parallel()
	primary, replica := testenv.RedisWithReplica(t)
	rc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	reg := prometheus.NewRegistry()
	w, err := replication.New(replication.Config{Replicas: 1, Timeout: time.Second, ReadyAfter: 30 * time.Second, Registerer: reg, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	write := func() error {
		return w.Pipelined(ctx, rc, "k", "test", func(p redis.Pipeliner) { p.Incr(ctx, "k") })
	}
	if err := write(); err != nil {
		t.Fatalf("replica up: %v", err)
	}
	replica.Pause(t)
	if err := write(); !errors.Is(err, replication.ErrShort) {
		t.Fatalf("replica stopped: %v, want ErrShort", err)
	}
	if err := w.Ready(ctx); err != nil {
		t.Fatalf("ready failed on the first short write: %v", err)
	}
	clk.add(20 * time.Second)
	write()
	clk.add(11 * time.Second)
	if err := w.Ready(ctx); err == nil {
		t.Fatal("ready after 31 s of short writes")
	}
	if n := shortTotal(t, reg); n != 2 {
		t.Errorf("replication_short_total %v, want 2", n)
	}
	replica.Resume(t)
	deadline := time.Now().Add(20 * time.Second)
	for write() != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes still short 20 s after the replica came back")
		}
	}
	if err := w.Ready(ctx); err != nil {
		t.Errorf("ready after an acknowledged write: %v", err)
	}
}

func shortTotal(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "junban_redis_replication_short_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Off, Pipelined runs the commands and nothing else: no WAIT reaches the server.
func TestOffSendsNoWait(t *testing.T) {
	t.Parallel()
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	w, err := replication.New(replication.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var c *redis.IntCmd
	if err := w.Pipelined(ctx, rc, prefix+":k", "test", func(p redis.Pipeliner) { c = p.Incr(ctx, prefix+":k") }); err != nil || c.Val() != 1 {
		t.Fatalf("off: %v %v", c.Val(), err)
	}
	if w.On() || w.Append(ctx, rc.Pipeline(), "test") != nil || w.Ready(ctx) != nil {
		t.Error("a Waiter of 0 replicas is on")
	}
}

// On a Redis Cluster, Pipelined sends the write and its WAIT to the primary of the key:
// a key whose primary's replica is stopped is short, a key of another primary is not.
//
// Broken variant tried: the pipeline of the cluster client (WAIT went to any node: the
// stopped replica's keys came back acknowledged).
func TestClusterWaitGoesToTheKeysPrimary(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisClusterWithReplicas(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Seed}})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	w, err := replication.New(replication.Config{Replicas: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := map[string]string{}
	for i := 0; len(keyOf) < 3; i++ {
		k := "{k" + strings.Repeat("x", i) + "}:v"
		node, err := rc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keyOf[node.Options().Addr]; !ok {
			keyOf[node.Options().Addr] = k
		}
	}
	var stopped string
	for addr := range keyOf {
		stopped = addr
		break
	}
	cl.Replica[stopped].Pause(t)
	defer cl.Replica[stopped].Resume(t)
	for addr, k := range keyOf {
		err := w.Pipelined(ctx, rc, k, "test", func(p redis.Pipeliner) { p.Incr(ctx, k) })
		switch {
		case addr == stopped && !errors.Is(err, replication.ErrShort):
			t.Errorf("write on %s, whose replica is stopped: %v, want ErrShort", addr, err)
		case addr != stopped && err != nil:
			t.Errorf("write on %s: %v", addr, err)
		}
	}
}

// JUNBAN_REDIS_WAIT_AOF is refused at start-up by a server without WAITAOF (older than
// 7.2) or without appendonly, with a message that says which.
func TestWaitAOFRefusedByAServerWithoutIt(t *testing.T) {
	t.Parallel()
	rc, _ := testenv.Redis(t)
	ctx := context.Background()
	w, err := replication.New(replication.Config{Replicas: 1, AOF: true})
	if err != nil {
		t.Fatal(err)
	}
	info := rc.Info(ctx, "server", "persistence").Val()
	err = w.Check(ctx, rc)
	switch {
	case strings.Contains(info, "redis_version:7.0") || strings.Contains(info, "redis_version:6."):
		if err == nil || !strings.Contains(err.Error(), "Redis 7.2 or later") {
			t.Errorf("a %s server: %v, want a refusal naming 7.2", info[strings.Index(info, "redis_version"):][:20], err)
		}
	case strings.Contains(info, "aof_enabled:0"):
		if err == nil || !strings.Contains(err.Error(), "appendonly") {
			t.Errorf("appendonly off: %v, want a refusal naming appendonly", err)
		}
	default:
		if err != nil {
			t.Errorf("a server with WAITAOF and appendonly: %v", err)
		}
	}
	off, _ := replication.New(replication.Config{})
	if err := off.Check(ctx, rc); err != nil {
		t.Errorf("off: %v", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, c := range []replication.Config{{Replicas: -1}, {Replicas: 1, Timeout: time.Microsecond}} {
		if _, err := replication.New(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
