package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Defaults of MonitorConfig.
const (
	// CheckIntervalDefault is how often the Monitor looks at the replicas after start.
	CheckIntervalDefault = 30 * time.Second
	// MaxLagDefault is Redis' own min-replicas-max-lag default: a replica that has not
	// acknowledged for longer is away, even while its link looks up.
	MaxLagDefault = 10 * time.Second
)

// ErrTooFewReplicas is a Replicas setting that the servers cannot ever meet (see
// Monitor.Start): every WAIT would come back short.
var ErrTooFewReplicas = errors.New("replication: fewer replicas than JUNBAN_REDIS_MIN_REPLICAS can ever acknowledge")

// MonitorConfig says what the Monitor compares and how often.
type MonitorConfig struct {
	// Redis is the client whose primaries are looked at: a *redis.Client (one primary) or
	// a *redis.ClusterClient (every primary).
	Redis redis.UniversalClient
	// Replicas is JUNBAN_REDIS_MIN_REPLICAS; 0 turns the Monitor off.
	Replicas int
	// Interval is how often the replicas are looked at after start.
	Interval time.Duration
	// MaxLag is how long a replica may go without acknowledging and still count online.
	MaxLag time.Duration
	// Logger gets a warning when a primary falls short and a line when it is back.
	Logger *zap.Logger
	// Registerer registers junban_redis_replicas and junban_redis_primaries_short_of_replicas;
	// nil registers them nowhere.
	Registerer prometheus.Registerer
}

// Primary is what one primary reports of its replicas.
type Primary struct {
	// Addr is the primary's address.
	Addr string
	// Online are its replicas whose link is up (state=online) and whose last
	// acknowledgement is at most MonitorConfig.MaxLag old.
	Online int
	// Known are the replicas it has: on one primary, those attached in any state (Redis
	// forgets a replica whose link is gone); on a cluster, those the topology assigns it,
	// failed ones included.
	Known int
}

// Monitor compares Replicas with the replicas each primary reports, at start and every
// Interval after.
type Monitor struct {
	cfg    MonitorConfig
	online *prometheus.GaugeVec
	short  prometheus.Gauge

	mu      sync.Mutex
	isShort map[string]bool // by primary: short at the last look
	seen    map[string]bool // primaries with a gauge
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewMonitor checks cfg and returns a Monitor; it looks at nothing until Start or Check.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if cfg.Interval == 0 {
		cfg.Interval = CheckIntervalDefault
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = MaxLagDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	switch {
	case cfg.Replicas < 0:
		return nil, fmt.Errorf("replication: Replicas %d is negative", cfg.Replicas)
	case cfg.Interval < 0 || cfg.MaxLag < 0:
		return nil, fmt.Errorf("replication: Interval %v, MaxLag %v: must not be negative", cfg.Interval, cfg.MaxLag)
	case cfg.Replicas > 0 && cfg.Redis == nil:
		return nil, errors.New("replication: Monitor without a Redis client")
	}
	m := &Monitor{
		cfg: cfg, isShort: map[string]bool{}, seen: map[string]bool{},
		online: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "redis", Name: "replicas",
			Help: "Replicas of each primary that are online (link up, last acknowledgement at most 10 s old), looked at every JUNBAN_REDIS_REPLICA_CHECK_INTERVAL.",
		}, []string{"primary"}),
		short: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Name: "redis_primaries_short_of_replicas",
			Help: "Primaries with fewer online replicas than JUNBAN_REDIS_MIN_REPLICAS at the last look: their writes come back short (WAIT) and are retried.",
		}),
	}
	if cfg.Registerer != nil && cfg.Replicas > 0 {
		for _, c := range []prometheus.Collector{m.online, m.short} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Start looks at the replicas once and refuses a setting they can never meet
// (ErrTooFewReplicas, naming the primary and the counts):
//   - one primary: fewer replicas attached to it, in any state, than Replicas;
//   - a Redis Cluster: too few nodes, failed ones included, to give every primary that
//     serves slots Replicas replicas (nodes - primaries < primaries * Replicas). A primary
//     short of replicas while the cluster has nodes to spare (a failed primary that will
//     rejoin as a replica, replica migration) is warned of, not refused.
//
// A primary that cannot be looked at is a warning, at start too. Then it looks again every
// Interval until ctx ends or Stop. Off (Replicas 0), it does nothing.
func (m *Monitor) Start(ctx context.Context) error {
	if m.cfg.Replicas == 0 {
		return nil
	}
	if _, err := m.check(ctx, true); errors.Is(err, ErrTooFewReplicas) {
		return err
	} else if err != nil {
		// A primary away at start (a failover under way) refuses nothing: the next looks
		// see what replaces it.
		m.cfg.Logger.Warn("could not look at the Redis replicas at start", zap.Error(err))
	}
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.cancel, m.done = cancel, make(chan struct{})
	done := m.done
	m.mu.Unlock()
	go func() {
		defer close(done)
		tick := time.NewTicker(m.cfg.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := m.check(ctx, false); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("could not look at the Redis replicas", zap.Error(err))
			}
		}
	}()
	return nil
}

// Stop ends the looks Start began and waits for the one under way; safe to call twice.
func (m *Monitor) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Check looks at every primary's replicas once, sets the metrics and logs a primary that
// fell short or is back; the error is a primary that could not be looked at.
func (m *Monitor) Check(ctx context.Context) ([]Primary, error) { return m.check(ctx, false) }

func (m *Monitor) check(ctx context.Context, start bool) ([]Primary, error) {
	ps, capacity, err := m.look(ctx)
	if err != nil {
		return nil, err
	}
	if start {
		if err := m.refuse(ps, capacity); err != nil {
			return ps, err
		}
	}
	m.observe(ps)
	return ps, nil
}

// capacity is what a cluster's topology can give: nodes (failed ones included) and the
// primaries that serve slots. Zero on one primary.
type capacity struct{ nodes, primaries int }

func (m *Monitor) refuse(ps []Primary, c capacity) error {
	want := m.cfg.Replicas
	if c.primaries > 0 {
		if spare := c.nodes - c.primaries; spare < c.primaries*want {
			var short []string
			for _, p := range ps {
				if p.Known < want {
					short = append(short, fmt.Sprintf("%s has %d (%d online)", p.Addr, p.Known, p.Online))
				}
			}
			return fmt.Errorf("%w: the cluster has %d nodes for %d primaries, %d replicas per primary at most, JUNBAN_REDIS_MIN_REPLICAS is %d (%s)", ErrTooFewReplicas, c.nodes, c.primaries, spare/c.primaries, want, strings.Join(short, ", "))
		}
		return nil
	}
	for _, p := range ps {
		if p.Known < want {
			return fmt.Errorf("%w: primary %s has %d replicas (%d online), JUNBAN_REDIS_MIN_REPLICAS is %d", ErrTooFewReplicas, p.Addr, p.Known, p.Online, want)
		}
	}
	return nil
}

func (m *Monitor) observe(ps []Primary) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := map[string]bool{}
	short := 0
	for _, p := range ps {
		now[p.Addr] = true
		m.online.WithLabelValues(p.Addr).Set(float64(p.Online))
		isShort := p.Online < m.cfg.Replicas
		if isShort {
			short++
		}
		switch {
		case isShort && !m.isShort[p.Addr]:
			m.cfg.Logger.Warn("Redis primary has fewer online replicas than JUNBAN_REDIS_MIN_REPLICAS: its writes are not acknowledged and are retried",
				zap.String("primary", p.Addr), zap.Int("online", p.Online), zap.Int("known", p.Known), zap.Int("min_replicas", m.cfg.Replicas))
		case !isShort && m.isShort[p.Addr]:
			m.cfg.Logger.Info("Redis primary has its replicas back",
				zap.String("primary", p.Addr), zap.Int("online", p.Online), zap.Int("min_replicas", m.cfg.Replicas))
		}
		m.isShort[p.Addr] = isShort
	}
	// A primary that is one no longer (failed over, removed) keeps no gauge.
	for addr := range m.seen {
		if !now[addr] {
			m.online.DeleteLabelValues(addr)
			delete(m.isShort, addr)
		}
	}
	m.seen = now
	m.short.Set(float64(short))
}

func (m *Monitor) look(ctx context.Context) ([]Primary, capacity, error) {
	switch c := m.cfg.Redis.(type) {
	case *redis.Client:
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return nil, capacity{}, fmt.Errorf("replication: INFO on %s: %w", c.Options().Addr, err)
		}
		if role := infoField(info, "role"); role != "master" {
			return nil, capacity{}, fmt.Errorf("replication: %s is not a primary (role:%s)", c.Options().Addr, role)
		}
		online, known := replicasOf(info, m.cfg.MaxLag)
		return []Primary{{Addr: c.Options().Addr, Online: online, Known: known}}, capacity{}, nil
	case *redis.ClusterClient:
		return m.lookCluster(ctx, c)
	}
	return nil, capacity{}, fmt.Errorf("replication: cannot look at the replicas of a %T", m.cfg.Redis)
}

func (m *Monitor) lookCluster(ctx context.Context, cc *redis.ClusterClient) ([]Primary, capacity, error) {
	var mu sync.Mutex
	var ps []Primary
	var stale bool
	var capa capacity
	// ForEachMaster runs the callbacks concurrently.
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		addr := c.Options().Addr
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("replication: INFO on %s: %w", addr, err)
		}
		if infoField(info, "role") != "master" {
			// The client's view of the cluster is older than a failover.
			mu.Lock()
			stale = true
			mu.Unlock()
			return nil
		}
		nodes, err := c.ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Errorf("replication: CLUSTER NODES on %s: %w", addr, err)
		}
		topo := parseClusterNodes(nodes)
		online, _ := replicasOf(info, m.cfg.MaxLag)
		mu.Lock()
		defer mu.Unlock()
		ps = append(ps, Primary{Addr: addr, Online: online, Known: topo.replicasOfMyself})
		if topo.nodes > capa.nodes {
			capa = capacity{nodes: topo.nodes, primaries: topo.primaries}
		}
		return nil
	})
	if stale {
		cc.ReloadState(ctx)
	}
	if err != nil {
		return nil, capacity{}, err
	}
	slices.SortFunc(ps, func(a, b Primary) int { return strings.Compare(a.Addr, b.Addr) })
	return ps, capa, nil
}

// replicasOf reads INFO replication's replica lines ("slave0:ip=…,port=…,state=online,
// offset=…,lag=0"): known counts them all, online those online within maxLag.
func replicasOf(info string, maxLag time.Duration) (online, known int) {
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "slave") {
			continue
		}
		if _, err := strconv.Atoi(name[len("slave"):]); err != nil {
			continue // slave_read_repl_offset and the like
		}
		known++
		var state string
		lag := -1
		for _, kv := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "state":
				state = v
			case "lag":
				if n, err := strconv.Atoi(v); err == nil {
					lag = n
				}
			}
		}
		if state == "online" && lag >= 0 && time.Duration(lag)*time.Second <= maxLag {
			online++
		}
	}
	return online, known
}

// topology is what CLUSTER NODES says, as the node that answered sees it.
type topology struct {
	// nodes are the cluster's nodes, failed ones included, not those in handshake.
	nodes int
	// primaries are the primaries that serve slots.
	primaries int
	// replicasOfMyself are the replicas of the node that answered, failed ones included.
	replicasOfMyself int
}

// parseClusterNodes reads CLUSTER NODES: "<id> <addr> <flags> <primary id|-> <ping>
// <pong> <epoch> <link> [<slot> …]" a line.
func parseClusterNodes(s string) topology {
	var t topology
	var myself string
	primaryOf := map[string]int{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "handshake") || slices.Contains(flags, "noaddr") {
			continue
		}
		t.nodes++
		if slices.Contains(flags, "myself") {
			myself = f[0]
		}
		switch {
		case slices.Contains(flags, "master") && len(f) > 8:
			t.primaries++
		case slices.Contains(flags, "slave") && f[3] != "-":
			primaryOf[f[3]]++
		}
	}
	if myself != "" {
		t.replicasOfMyself = primaryOf[myself]
	}
	return t
}
