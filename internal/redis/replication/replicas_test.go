package replication_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/junban/junban/internal/redis/replication"
	"github.com/junban/junban/internal/testenv"
)

// gauge is the value of the junban gauge name with the given label value (any, for a
// gauge without labels), and whether it exists.
func gauge(t *testing.T, reg *prometheus.Registry, name, primary string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() == primary {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// The gauge shows a primary's online replicas from the first look; a replica killed
// after start drops it, counts its primary short and logs one warning naming it; a
// paused replica (its link still up) counts as away once it stops acknowledging.
//
// Broken variants tried: online counted as INFO's connected_slaves, whatever the lag (the
// paused replica stayed online: the wait for 0 timed out); the warning logged on every
// look (two warnings, want one).
func TestMonitorSeesReplicasGoAway(t *testing.T) {
	t.Parallel()
	primary, replicas := testenv.RedisWithReplicas(t, 2)
	rc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { rc.Close() })
	reg := prometheus.NewRegistry()
	log, logs := testenv.Logger(zapcore.WarnLevel)
	m, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: 2, Interval: 20 * time.Millisecond,
		MaxLag: time.Second, Logger: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatalf("two replicas online, setting 2: %v", err)
	}
	t.Cleanup(m.Stop)
	if v, _ := gauge(t, reg, "junban_redis_replicas", primary.Addr); v != 2 {
		t.Errorf("junban_redis_replicas{primary=%q} %v after start, want 2", primary.Addr, v)
	}
	if v, ok := gauge(t, reg, "junban_redis_primaries_short_of_replicas", ""); !ok || v != 0 {
		t.Errorf("junban_redis_primaries_short_of_replicas %v (%v) after start, want 0", v, ok)
	}

	replicas[0].Stop(t)
	testenv.WaitFor(t, 30*time.Second, "the gauge at 1 after a replica was killed", func() bool {
		v, _ := gauge(t, reg, "junban_redis_replicas", primary.Addr)
		return v == 1
	})
	if v, _ := gauge(t, reg, "junban_redis_primaries_short_of_replicas", ""); v != 1 {
		t.Errorf("junban_redis_primaries_short_of_replicas %v with 1 of 2 replicas, want 1", v)
	}
	testenv.WaitFor(t, 30*time.Second, "a warning naming the primary", func() bool {
		return logs.FilterField(zap.String("primary", primary.Addr)).Len() > 0
	})

	replicas[1].Pause(t)
	t.Cleanup(func() { replicas[1].Resume(t) })
	testenv.WaitFor(t, 30*time.Second, "the gauge at 0 after a replica stopped acknowledging", func() bool {
		v, _ := gauge(t, reg, "junban_redis_replicas", primary.Addr)
		return v == 0
	})
	m.Stop()
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings while the primary stayed short, want 1", n)
	}
	if w := logs.All()[0]; !strings.Contains(w.Message, "fewer online replicas") || w.ContextMap()["min_replicas"] != int64(2) {
		t.Errorf("warning %q %v", w.Message, w.ContextMap())
	}
}

// A setting the primary cannot meet is refused at start, naming the primary and the
// counts: a primary with one replica and the setting 2, a primary with none and 1.
// Off, the Monitor looks at nothing and refuses nothing.
//
// Broken variant tried: Start without the refusal (a warning only: Start returned nil).
func TestMonitorRefusesASettingThePrimaryCannotMeet(t *testing.T) {
	t.Parallel()
	primary, _ := testenv.RedisWithReplicas(t, 1)
	alone := testenv.StartRedisServer(t)
	for _, c := range []struct {
		addr           string
		replicas       int
		known, setting string
	}{
		{primary.Addr, 2, "has 1 replicas (1 online)", "JUNBAN_REDIS_MIN_REPLICAS is 2"},
		{alone.Addr, 1, "has 0 replicas (0 online)", "JUNBAN_REDIS_MIN_REPLICAS is 1"},
	} {
		rc := redis.NewClient(&redis.Options{Addr: c.addr})
		defer rc.Close()
		m, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: c.replicas})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Start(context.Background())
		m.Stop()
		if !errors.Is(err, replication.ErrTooFewReplicas) || !strings.Contains(err.Error(), "primary "+c.addr+" "+c.known) || !strings.Contains(err.Error(), c.setting) {
			t.Errorf("%s with setting %d: %v, want ErrTooFewReplicas naming the primary and the counts", c.addr, c.replicas, err)
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: alone.Addr})
	defer rc.Close()
	off, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil {
		t.Errorf("off: %v", err)
	}
	off.Stop()
}

// On a Redis Cluster every primary is looked at (ForEachMaster): three gauges at 1; a
// setting of 2 on a cluster of three primaries with a replica each is refused; a replica
// killed after start leaves its primary short (warning, gauge at 0) while a new start
// with the setting 1 still passes: the cluster keeps the failed replica in its topology,
// and it can come back.
//
// Broken variants tried: one primary looked at instead of each ForEachMaster gives (two
// gauges missing); the refusal counting each primary's online replicas on a cluster (the
// second start was refused).
func TestMonitorLooksAtEveryClusterPrimary(t *testing.T) {
	t.Parallel()
	cl := testenv.RedisClusterWithReplicas(t)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Seed}})
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	if err := rc.ForEachShard(ctx, func(context.Context, *redis.Client) error { return nil }); err != nil {
		t.Fatal(err)
	}

	two, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	err = two.Start(ctx)
	two.Stop()
	if !errors.Is(err, replication.ErrTooFewReplicas) || !strings.Contains(err.Error(), "6 nodes for 3 primaries, 1 replicas per primary at most, JUNBAN_REDIS_MIN_REPLICAS is 2") {
		t.Errorf("setting 2 on a replica a primary: %v, want ErrTooFewReplicas with the counts", err)
	}

	reg := prometheus.NewRegistry()
	log, logs := testenv.Logger(zapcore.WarnLevel)
	m, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: 1, Interval: 20 * time.Millisecond, Logger: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatalf("setting 1 on a replica a primary: %v", err)
	}
	t.Cleanup(m.Stop)
	// A replica of a cluster just made may still be syncing: the monitor, looking every
	// 20 ms, sees each come online.
	for addr := range cl.Replica {
		testenv.WaitFor(t, 30*time.Second, "junban_redis_replicas{primary="+addr+"} at 1", func() bool {
			v, ok := gauge(t, reg, "junban_redis_replicas", addr)
			return ok && v == 1
		})
	}

	var killed string
	for addr := range cl.Replica {
		killed = addr
		break
	}
	// A replica still syncing when the monitor started was warned of already: the kill
	// must add one warning more, not one in all.
	warned := logs.FilterField(zap.String("primary", killed)).Len()
	cl.Replica[killed].Stop(t)
	testenv.WaitFor(t, 30*time.Second, "the killed replica's primary at 0", func() bool {
		v, _ := gauge(t, reg, "junban_redis_replicas", killed)
		s, _ := gauge(t, reg, "junban_redis_primaries_short_of_replicas", "")
		return v == 0 && s == 1
	})
	testenv.WaitFor(t, 30*time.Second, "a warning naming the primary", func() bool {
		return logs.FilterField(zap.String("primary", killed)).Len() == warned+1
	})
	again, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(ctx); err != nil {
		t.Errorf("start with a replica failed but in the topology: %v", err)
	}
	again.Stop()
}

// A primary that does not answer at start (a failover under way, a restart) is a warning,
// not a refusal: the worker starts, and the next looks see what replaces it.
//
// Broken variant tried: Start returning every error of its first look (the start failed
// with "connection refused").
func TestMonitorStartsWhileAPrimaryIsAway(t *testing.T) {
	t.Parallel()
	gone := testenv.StartRedisServer(t)
	gone.Stop(t)
	rc := redis.NewClient(&redis.Options{Addr: gone.Addr, MaxRetries: -1})
	t.Cleanup(func() { rc.Close() })
	log, logs := testenv.Logger(zapcore.WarnLevel)
	m, err := replication.NewMonitor(replication.MonitorConfig{Redis: rc, Replicas: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Errorf("a primary away at start: %v, want a warning only", err)
	}
	m.Stop()
	if logs.FilterMessage("could not look at the Redis replicas at start").Len() != 1 {
		t.Errorf("warnings %v, want one that says the replicas could not be looked at", logs.All())
	}
}
