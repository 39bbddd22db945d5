// Package chaos runs junban's fleet under faults and checks that nothing was lost or
// applied twice: `junbanlab chaos`. It starts its own Redis (AOF, appendfsync always)
// and its own PostgreSQL cluster (initdb into a temporary directory), so that killing
// and stopping them disturbs nothing else on the machine; it uses the shared SQS
// endpoint with queues of its own. Two order-worker replicas and a persist-worker run
// as child processes while a loadgen workload flows in; meanwhile the fault schedule
// SIGKILLs order-workers and the persist-worker (restarting them), SIGKILLs and
// restarts Redis, and stops PostgreSQL for a while. Then the run waits for quiescence
// and checks the invariants of docs/architecture.md (see check.go).
//
// The Redis Cluster scenario (Config.RedisCluster) runs the fleet on a cluster of three
// masters with one replica each instead (the order-workers with REDIS_CLUSTER=true and
// JUNBAN_REDIS_MIN_REPLICAS) and, besides the order-worker kills, SIGKILLs a master in
// mid-run and waits for the cluster to promote its replica: asynchronous replication
// may lose what the dead master acknowledged last, which the same checks then find.
package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/migrations"
)

// Defaults of Config.
const (
	EventsDefault           = 10_000
	DuplicateShareDefault   = 0.2
	WarehouseShareDefault   = loadgen.WarehouseShareDefault
	SendDurationDefault     = 60 * time.Second
	PGOutageDefault         = 20 * time.Second
	OrderWorkerKillsDefault = 3
	QuiesceTimeoutDefault   = 5 * time.Minute
	LockTTLDefault          = 2 * time.Second
	SweepIntervalDefault    = 500 * time.Millisecond
	SQSWaitSecondsDefault   = 1
	// MaxReceiveCountDefault is the redrive policy of chaos's queues: a message that
	// failed this often (Redis or PostgreSQL away) goes to the DLQ and counts as lost.
	MaxReceiveCountDefault = 10
	// HoldForDefault is an abandoned order's hold: short, so that holds pass all through
	// the run, during the worker kills and the PostgreSQL outage.
	HoldForDefault = 3 * time.Second
	// expiryGrace is how long after its hold_until an abandoned order may still be
	// placed when the checks run: the order-workers' scan of the due index and the
	// expiry's way to PostgreSQL.
	expiryGrace = 15 * time.Second
	// KeyPrefix is the key prefix in chaos's own Redis.
	KeyPrefix = "junban"
	// restartDelay is the pause between a kill and the restart, as an orchestrator's.
	restartDelay = time.Second

	// MasterKillsDefault is how many times the Redis Cluster scenario SIGKILLs a master.
	MasterKillsDefault = 1
	// NodeTimeoutDefault is the cluster's cluster-node-timeout: a master unreachable
	// for that long is failed over to its replica.
	NodeTimeoutDefault = 2 * time.Second
	// ReplicaLagDefault is how long the Redis Cluster scenario holds the victim's
	// replica back (SIGSTOP) before it kills the master: on one machine replication
	// takes microseconds, so a master killed at a random instant almost never dies
	// with an acknowledged write unreplicated; a replica a second behind (a slow
	// replica, a network blip) is what makes asynchronous replication lose writes.
	ReplicaLagDefault = time.Second
	// MinRedisReplicasDefault is the JUNBAN_REDIS_MIN_REPLICAS the Redis Cluster
	// scenario asserts with.
	MinRedisReplicasDefault = 1
	// ReplicasDefault is the number of replicas of each master in the scenario;
	// maxReplicas the most it runs.
	ReplicasDefault = 1
	maxReplicas     = 2
	// CutEveryDefault is the pause between two cuts of every worker's Redis connection
	// when Config.CutConnections is on.
	CutEveryDefault = 3 * time.Second
	// failoverTimeout bounds the wait for a promotion, rejoinTimeout the wait for the
	// killed node to be a replica in sync again.
	failoverTimeout = 60 * time.Second
	rejoinTimeout   = 60 * time.Second
	// quiesceIdleGiveUp ends the wait for quiescence early when nothing is left in
	// flight anywhere (queues empty, no turn, wait list, proc or outbox in Redis) but
	// events are still missing: nothing can bring them back.
	quiesceIdleGiveUp = 15 * time.Second
)

// Config configures a chaos run. Zero fields take the defaults above.
type Config struct {
	// Events is the least number of events sent, duplicates included; the number of
	// orders is derived from it.
	Events int
	// DuplicateShare of the events are delivered a second time.
	DuplicateShare float64
	// WarehouseShare is the warehouse feed's share of the distinct events
	// (loadgen.Spec.WarehouseShare); negative: no feed.
	WarehouseShare float64
	// AbandonedShare of the orders are abandoned checkouts: reserve orders placed with a
	// hold of HoldFor and never paid nor cancelled, which junban must expire, each once
	// (0: none).
	AbandonedShare float64
	// HoldFor is an abandoned order's hold (HoldForDefault).
	HoldFor time.Duration
	// Seed makes the workload reproducible.
	Seed uint64
	// SendDuration is the time the workload is spread over; the faults are spread over
	// it too.
	SendDuration time.Duration
	// PGOutage is how long PostgreSQL stays stopped.
	PGOutage time.Duration
	// OrderWorkerKills is how many times an order-worker replica is SIGKILLed.
	OrderWorkerKills int
	// QuiesceTimeout bounds the wait for quiescence after the last event was sent.
	QuiesceTimeout time.Duration
	// LockTTL, SweepInterval and SQSWaitSeconds are the order-workers' settings:
	// short, so that a killed holder's turn is recovered quickly.
	LockTTL        time.Duration
	SweepInterval  time.Duration
	SQSWaitSeconds int
	// MaxReceiveCount is the queues' redrive policy.
	MaxReceiveCount int
	// RedisCluster runs the Redis Cluster failover scenario: the fleet on a local
	// cluster of three masters with a replica each, MasterKills SIGKILLs of a master
	// (each restarted as a replica once its replica was promoted) and the order-worker
	// kills; no PostgreSQL outage and no single-Redis restart.
	RedisCluster bool
	// MasterKills is how many masters the scenario kills, one after the other.
	MasterKills int
	// NodeTimeout is the cluster's cluster-node-timeout.
	NodeTimeout time.Duration
	// ReplicaLag is how long the victim's replica is stopped (SIGSTOP) right before its
	// master is killed; it resumes just after the kill, before the failover. Negative:
	// no lag.
	ReplicaLag time.Duration
	// MinRedisReplicas is passed to the order-workers as JUNBAN_REDIS_MIN_REPLICAS
	// (Redis Cluster scenario only; at most Replicas).
	MinRedisReplicas int
	// Replicas is the number of replicas of each master (ReplicasDefault; 1 or 2).
	Replicas int
	// ReplicaRestart replaces the replica lag before each master kill: the victim's
	// replica is SIGKILLed, its master SIGSTOPped (it can neither take writes nor feed
	// the replica any more), the replica started again from its append-only file
	// (appendfsync everysec) and, once it answers, the master SIGKILLed: the cluster
	// promotes a replica that holds only what its AOF kept.
	ReplicaRestart bool
	// CutConnections puts a TCP proxy in front of each Redis node (the single Redis, or
	// every cluster node, which then announces the proxy's port) and cuts every
	// connection through them every CutEvery while the workload is sent: scripts and
	// pipelines in flight lose their connection, before or after Redis ran them.
	// Replication links between cluster nodes go through the proxies too.
	CutConnections bool
	// CutEvery is the pause between two cuts (CutEveryDefault).
	CutEvery time.Duration
	// Locations spreads the lots over the shop's three locations (Locations: two
	// warehouses that ship, a store that only hands over) and routes every order, a pickup
	// at the store or a ship_to near a warehouse, with the workers' default strategies
	// closest, then ranked.
	Locations bool
	// BinDir holds order-worker and persist-worker; empty: see Binaries.
	BinDir string
	// WorkDir is where the temporary directory is made; empty: os.TempDir().
	WorkDir string
	// Keep keeps the temporary directory (logs, data) instead of removing it.
	Keep bool
	// SQS is the SQS endpoint (required: Region; Endpoint for the local emulator).
	SQS config.SQS
	// SNSEndpoint is the SNS endpoint beside it (AWS_ENDPOINT_URL_SNS, fauxqs): the run
	// creates an outbound topic there with a queue subscribed, the persist-worker publishes
	// to it, and Check compares what the queue got with the outbox. Empty while
	// SQS.Endpoint is set (an emulator without SNS): no outbound topic.
	SNSEndpoint string
	// OutboundSettleTimeout bounds Check's wait for the relay and the subscriber queue
	// (OutboundSettleTimeoutDefault).
	OutboundSettleTimeout time.Duration
	// ChildEnv is passed to the workers on top of what chaos sets (AWS credentials).
	ChildEnv []string
	// Progress receives one line per phase and fault; nil prints nothing.
	Progress io.Writer
}

func (c *Config) setDefaults() {
	if c.Events <= 0 {
		c.Events = EventsDefault
	}
	if c.DuplicateShare == 0 {
		c.DuplicateShare = DuplicateShareDefault
	}
	if c.WarehouseShare == 0 {
		c.WarehouseShare = WarehouseShareDefault
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.HoldFor <= 0 {
		c.HoldFor = HoldForDefault
	}
	if c.SendDuration <= 0 {
		c.SendDuration = SendDurationDefault
	}
	if c.PGOutage == 0 {
		c.PGOutage = PGOutageDefault
	}
	if c.OrderWorkerKills == 0 {
		c.OrderWorkerKills = OrderWorkerKillsDefault
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = QuiesceTimeoutDefault
	}
	if c.LockTTL <= 0 {
		c.LockTTL = LockTTLDefault
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = SweepIntervalDefault
	}
	if c.SQSWaitSeconds <= 0 {
		c.SQSWaitSeconds = SQSWaitSecondsDefault
	}
	if c.MaxReceiveCount <= 0 {
		c.MaxReceiveCount = MaxReceiveCountDefault
	}
	if c.MasterKills <= 0 {
		c.MasterKills = MasterKillsDefault
	}
	if c.NodeTimeout <= 0 {
		c.NodeTimeout = NodeTimeoutDefault
	}
	if c.ReplicaLag == 0 {
		c.ReplicaLag = ReplicaLagDefault
	}
	if c.Replicas <= 0 {
		c.Replicas = ReplicasDefault
	}
	if c.CutEvery <= 0 {
		c.CutEvery = CutEveryDefault
	}
	if c.OutboundSettleTimeout <= 0 {
		c.OutboundSettleTimeout = OutboundSettleTimeoutDefault
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Validate reports what is wrong with c (after defaults).
func (c Config) Validate() error {
	var p []string
	if c.DuplicateShare < 0 || c.DuplicateShare > 1 {
		p = append(p, "duplicate share must be within 0..1")
	}
	if c.WarehouseShare > 0.5 {
		p = append(p, "warehouse share must be at most 0.5")
	}
	if c.PGOutage < 0 {
		p = append(p, "PostgreSQL outage must not be negative")
	}
	if c.Replicas < 1 || c.Replicas > maxReplicas {
		p = append(p, fmt.Sprintf("replicas per master must be within 1..%d", maxReplicas))
	}
	if c.MinRedisReplicas < 0 || c.MinRedisReplicas > c.Replicas {
		p = append(p, fmt.Sprintf("min Redis replicas must be within 0..%d (the cluster's replicas per master)", c.Replicas))
	}
	if c.ReplicaRestart && !c.RedisCluster {
		p = append(p, "the replica restart needs the Redis Cluster scenario")
	}
	if c.RedisCluster && !c.ReplicaRestart && c.ReplicaLag >= c.NodeTimeout {
		p = append(p, "the replica lag must be shorter than the cluster node timeout (or the replica is failed too)")
	}
	if c.MinRedisReplicas > 0 && !c.RedisCluster {
		p = append(p, "min Redis replicas needs the Redis Cluster scenario (a single Redis has no replica)")
	}
	if c.SQS.Region == "" {
		p = append(p, "AWS_REGION is required")
	}
	if len(p) > 0 {
		return errors.New("chaos: " + strings.Join(p, "; "))
	}
	return nil
}

// Run starts the environment, drives the workload under faults, waits for quiescence,
// checks the invariants and removes everything it started (also on failure or when
// ctx ends). A report with a failed check is not an error: see Report.OK.
func Run(ctx context.Context, cfg Config) (Report, error) {
	env, err := Start(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	defer env.Close()
	if err := env.Drive(ctx); err != nil {
		return env.report, err
	}
	return env.Check(ctx)
}

// RunFailover runs the Redis Cluster scenario of cfg twice, one after the other, each
// on a cluster, a PostgreSQL and queues of its own: first with
// JUNBAN_REDIS_MIN_REPLICAS=0, then with cfg.MinRedisReplicas (MinRedisReplicasDefault
// when 0). It returns the second run's report with the first as its Baseline: what
// asynchronous replication alone loses, side by side with what the setting keeps.
func RunFailover(ctx context.Context, cfg Config) (Report, error) {
	cfg.RedisCluster = true
	if cfg.MinRedisReplicas == 0 {
		cfg.MinRedisReplicas = MinRedisReplicasDefault
	}
	check := cfg
	check.setDefaults()
	if err := check.Validate(); err != nil {
		return Report{}, err
	}
	progress := cmp.Or[io.Writer](cfg.Progress, io.Discard)
	base := cfg
	base.MinRedisReplicas = 0
	fmt.Fprintln(progress, "chaos: run 1 of 2: JUNBAN_REDIS_MIN_REPLICAS=0 (reported, not asserted)")
	b, err := Run(ctx, base)
	if err != nil {
		return b, err
	}
	fmt.Fprintf(progress, "chaos: run 2 of 2: JUNBAN_REDIS_MIN_REPLICAS=%d (asserted)\n", cfg.MinRedisReplicas)
	r, err := Run(ctx, cfg)
	r.Baseline = &b
	return r, err
}

// RunSeries runs the scenario of cfg runs times in a row, each on servers and queues of
// its own, run i with the seed cfg.Seed+i, and returns every report (one line each:
// SeriesLine). It stops at the first error; a failed check is not one.
func RunSeries(ctx context.Context, cfg Config, runs int) ([]Report, error) {
	progress := cmp.Or[io.Writer](cfg.Progress, io.Discard)
	seed := max(cfg.Seed, 1)
	var reps []Report
	for i := range runs {
		c := cfg
		c.Seed = seed + uint64(i)
		fmt.Fprintf(progress, "chaos: run %d of %d, seed %d\n", i+1, runs, c.Seed)
		r, err := Run(ctx, c)
		r.Seed = c.Seed
		reps = append(reps, r)
		if err != nil {
			return reps, fmt.Errorf("run %d of %d (seed %d): %w", i+1, runs, c.Seed, err)
		}
		fmt.Fprintln(progress, "chaos: "+r.SeriesLine(i+1, runs))
	}
	return reps, nil
}

// Env is a running chaos environment: own Redis and PostgreSQL, queues, the fleet.
type Env struct {
	cfg     Config
	dir     string
	binDir  string
	redis   *redisServer  // the single Redis, or
	cluster *redisCluster // the Redis Cluster of the failover scenario
	// redisProxy stands between the workers and the single Redis (Config.CutConnections).
	redisProxy proxies
	pg         *postgresServer
	rc         redis.UniversalClient
	db         *gorm.DB
	sqs        *sqs.Client
	orders     queue.Pair
	results    queue.Pair
	queues     []string
	workers    []*proc // order-worker replicas
	persist    *proc
	cancel     context.CancelFunc // ends the supervisors
	// outbound is the run's outbound topic and subscriber queue; nil without SNS.
	outbound  *outboundRun
	stopDrain context.CancelFunc // ends the outbound drain

	workload loadgen.Workload
	sent     []string // distinct event ids, in sending order
	start    time.Time
	report   Report
	mu       sync.Mutex
}

// Start creates the temporary directory, starts Redis and PostgreSQL, applies the
// migrations, creates the queues, builds or finds the binaries and starts the fleet.
// On error everything started so far is removed.
func Start(ctx context.Context, cfg Config) (env *Env, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.WorkDir, "junban-chaos-")
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, dir: dir}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	e.logf("work directory %s", dir)
	bin, how, err := Binaries(ctx, cfg.BinDir, filepath.Join(dir, "bin"))
	if err != nil {
		return e, err
	}
	e.binDir = bin
	e.logf("binaries in %s (%s)", bin, how)
	e.report.RedisCluster = cfg.RedisCluster
	if cfg.RedisCluster {
		e.report.MinRedisReplicas = cfg.MinRedisReplicas
		if !cfg.ReplicaRestart {
			e.report.ReplicaLagS = round1(max(0, cfg.ReplicaLag).Seconds())
		}
		e.report.MinRedisReplicasKnown = knowsMinReplicas(ctx, filepath.Join(bin, "order-worker"))
		e.report.Replicas = cfg.Replicas
		if e.cluster, err = startCluster(ctx, dir, cfg.NodeTimeout, cfg.Replicas); err != nil {
			return e, err
		}
		e.logf("Redis Cluster of 3 masters with %d replica(s) each on %s (appendonly yes, everysec; cluster-node-timeout %s)",
			cfg.Replicas, strings.Join(e.cluster.nodes, " "), cfg.NodeTimeout)
		if cfg.CutConnections {
			if err = e.cluster.behindProxies(ctx, 30*time.Second); err != nil {
				return e, err
			}
			e.logf("a cutting proxy in front of every node, announced as the node's port: %s", e.cluster.url())
		}
		if !e.report.MinRedisReplicasKnown && cfg.MinRedisReplicas > 0 {
			e.logf("WARNING: order-worker does not read JUNBAN_REDIS_MIN_REPLICAS: this run acknowledges without waiting for a replica")
		}
	} else {
		if e.redis, err = startRedis(ctx, dir); err != nil {
			return e, err
		}
		e.logf("redis-server on port %d (appendonly yes, appendfsync always)", e.redis.port)
		if cfg.CutConnections {
			if e.redisProxy, err = startProxies([]string{addr(e.redis.port)}); err != nil {
				return e, err
			}
			e.logf("the workers reach Redis through a cutting proxy on %s", e.redisProxy.of(addr(e.redis.port)))
		}
	}
	if e.pg, err = startPostgres(ctx, dir); err != nil {
		return e, err
	}
	e.logf("postgres on port %d (%s, data in %s)", e.pg.port, e.pg.bin, e.pg.data())
	if e.db, err = (config.Postgres{URL: e.pg.url("junban")}).Open(); err != nil {
		return e, err
	}
	sqlDB, err := e.db.DB()
	if err != nil {
		return e, err
	}
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return e, err
	}
	if e.rc, err = e.redisConfig().Client(); err != nil {
		return e, err
	}
	if e.sqs, err = queue.NewClient(ctx, cfg.SQS); err != nil {
		return e, err
	}
	name := "chaos-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if e.orders, err = queue.EnsurePair(ctx, e.sqs, name+"-orders", name+"-orders-dlq", cfg.MaxReceiveCount, 10); err != nil {
		return e, err
	}
	e.queues = append(e.queues, e.orders.URL, e.orders.DLQURL)
	if e.results, err = queue.EnsurePair(ctx, e.sqs, name+"-results", name+"-results-dlq", cfg.MaxReceiveCount, 10); err != nil {
		return e, err
	}
	e.queues = append(e.queues, e.results.URL, e.results.DLQURL)
	e.logf("queues %s-{orders,results}[-dlq] (maxReceiveCount %d)", name, cfg.MaxReceiveCount)
	var persistEnv []string
	if cfg.outboundOn() {
		if persistEnv, err = e.startOutbound(ctx, name); err != nil {
			return e, err
		}
	} else {
		e.logf("outbound events: off (no SNS beside %s)", cfg.SQS.Endpoint)
	}
	if err := e.startFleet(ctx, persistEnv); err != nil {
		return e, err
	}
	if e.outbound != nil {
		drain, stop := context.WithCancel(context.Background())
		e.stopDrain = stop
		go e.drainOutbound(drain)
	}
	return e, nil
}

func (e *Env) logf(format string, args ...any) {
	at := ""
	if !e.start.IsZero() {
		at = fmt.Sprintf("t+%5.1fs ", time.Since(e.start).Seconds())
	}
	fmt.Fprintf(e.cfg.Progress, "chaos: %s%s\n", at, fmt.Sprintf(format, args...))
}

// childEnv is the environment of every worker: no stack file, chaos's services.
func (e *Env) childEnv(httpPort int) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"JUNBAN_STACK_ENV=/nonexistent/stack.env",
		"JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
		"JUNBAN_HTTP_ADDR=" + addr(httpPort),
		"JUNBAN_SHUTDOWN_BUDGET=5s",
		"REDIS_URL=" + e.workerRedisURL(),
		"REDIS_CLUSTER=" + strconv.FormatBool(e.cluster != nil),
		"JUNBAN_KEY_PREFIX=" + KeyPrefix,
		"DATABASE_URL=" + e.pg.url("junban"),
		"AWS_REGION=" + e.cfg.SQS.Region,
		"JUNBAN_ORDERS_QUEUE=" + e.orders.URL, "JUNBAN_ORDERS_DLQ=" + e.orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + e.results.URL, "JUNBAN_RESULTS_DLQ=" + e.results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=" + strconv.Itoa(e.cfg.SQSWaitSeconds),
	}
	if e.cfg.SQS.Endpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_SQS="+e.cfg.SQS.Endpoint)
	}
	if e.cfg.Locations {
		env = append(env, "JUNBAN_ALLOCATION_STRATEGIES=closest,ranked")
	}
	return append(env, e.cfg.ChildEnv...)
}

// redisConfig is how the workers and the checks reach Redis.
func (e *Env) redisConfig() config.Redis {
	if e.cluster != nil {
		return config.Redis{URL: e.cluster.url(), Cluster: true, KeyPrefix: KeyPrefix}
	}
	return config.Redis{URL: e.redis.url(), KeyPrefix: KeyPrefix}
}

// workerRedisURL is how the workers reach Redis: as the checks do, but through the
// cutting proxy in front of a single Redis (a cluster's nodes announce their proxies).
func (e *Env) workerRedisURL() string {
	if e.redisProxy != nil {
		return fmt.Sprintf("redis://%s/0", e.redisProxy.of(addr(e.redis.port)))
	}
	return e.redisConfig().URL
}

// cutConnections cuts every connection through the proxies; it returns the pairs cut and
// those cut in the middle of a call.
func (e *Env) cutConnections() (pairs, midCall int) {
	if e.cluster != nil {
		return e.cluster.proxies.cut()
	}
	return e.redisProxy.cut()
}

// knowsMinReplicas tells whether the order-worker reads JUNBAN_REDIS_MIN_REPLICAS (its
// --env-vars lists it): a binary that does not acknowledges without waiting, whatever
// the scenario passes.
func knowsMinReplicas(ctx context.Context, orderWorker string) bool {
	out, err := exec.CommandContext(ctx, orderWorker, "--env-vars").Output()
	return err == nil && strings.Contains(string(out), "JUNBAN_REDIS_MIN_REPLICAS")
}

// startFleet starts the order-workers and the persist-worker, persistEnv added to the
// latter's environment.
func (e *Env) startFleet(ctx context.Context, persistEnv []string) error {
	for i := range 2 {
		port, err := freePort()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("order-worker-%d", i+1)
		e.workers = append(e.workers, &proc{
			name: name, path: filepath.Join(e.binDir, "order-worker"), log: logPath(e.dir, name), httpAddr: addr(port),
			env: append(e.childEnv(port),
				"JUNBAN_LOCK_TTL="+e.cfg.LockTTL.String(),
				"JUNBAN_HANDLER_DEADLINE="+max(20*time.Second, 3*e.cfg.LockTTL).String(),
				"JUNBAN_SWEEP_INTERVAL="+e.cfg.SweepInterval.String(),
				"JUNBAN_DRAIN_MAX_TIME=5s",
			),
		})
		if e.cluster != nil {
			w := e.workers[len(e.workers)-1]
			w.env = append(w.env, "JUNBAN_REDIS_MIN_REPLICAS="+strconv.Itoa(e.cfg.MinRedisReplicas))
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	e.persist = &proc{
		name: "persist-worker", path: filepath.Join(e.binDir, "persist-worker"), log: logPath(e.dir, "persist-worker"), httpAddr: addr(port),
		env: append(e.childEnv(port),
			"JUNBAN_PERSIST_VISIBILITY=6s",
			"JUNBAN_PERSIST_RETRY_MAX=2s",
			"JUNBAN_PERSIST_ATTEMPT_TIMEOUT=10s",
		),
	}
	e.persist.env = append(e.persist.env, persistEnv...)
	sup, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	for _, p := range e.all() {
		if err := p.start(); err != nil {
			return err
		}
		go p.supervise(sup, restartDelay)
	}
	for _, p := range e.all() {
		if err := p.waitReady(ctx, 60*time.Second); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(p.log, 3000))
		}
	}
	e.logf("fleet ready: 2 order-workers (lock TTL %s, sweep %s, SQS wait %ds) and a persist-worker",
		e.cfg.LockTTL, e.cfg.SweepInterval, e.cfg.SQSWaitSeconds)
	if e.cluster != nil {
		e.logf("order-workers with REDIS_CLUSTER=true JUNBAN_REDIS_MIN_REPLICAS=%d", e.cfg.MinRedisReplicas)
	}
	return nil
}

func (e *Env) all() []*proc { return append(append([]*proc(nil), e.workers...), e.persist) }

// Close stops the fleet, Redis and PostgreSQL, deletes the queues and removes the
// temporary directory (unless Keep). It is safe on a partly started Env.
func (e *Env) Close() {
	if e.cancel != nil {
		e.cancel()
	}
	e.stopOutbound()
	var wg sync.WaitGroup
	for _, p := range e.all() {
		if p != nil {
			wg.Go(func() { p.close(5 * time.Second) })
		}
	}
	wg.Wait()
	if e.rc != nil {
		e.rc.Close()
	}
	if e.db != nil {
		if sqlDB, err := e.db.DB(); err == nil {
			sqlDB.Close()
		}
	}
	e.redisProxy.close()
	if e.redis != nil {
		e.redis.close()
	}
	if e.cluster != nil {
		e.cluster.close(e.cfg.Keep)
	}
	if e.pg != nil {
		if e.cfg.Keep {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			e.pg.stop(ctx)
			cancel()
		} else {
			e.pg.remove()
		}
	}
	if e.sqs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, q := range e.queues {
			e.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(q)})
		}
		e.deleteOutboundTopic(ctx)
		cancel()
	}
	if e.dir != "" {
		if e.cfg.Keep {
			e.logf("kept %s (logs, Redis and PostgreSQL data)", e.dir)
		} else {
			os.RemoveAll(e.dir)
		}
	}
}

// Redis is chaos's own Redis (for tests that break something on purpose).
func (e *Env) Redis() redis.UniversalClient { return e.rc }

// DB is chaos's own PostgreSQL database.
func (e *Env) DB() *gorm.DB { return e.db }

// Workload is what Drive sent.
func (e *Env) Workload() loadgen.Workload { return e.workload }

// Publish puts bodies on the orders queue (for tests that break something on purpose).
func (e *Env) Publish(ctx context.Context, bodies [][]byte) error {
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: e.sqs, QueueURL: e.orders.URL})
	if err != nil {
		return err
	}
	defer pub.Stop(context.Background())
	return pub.PublishBatch(ctx, bodies)
}

// queueDepth is the number of messages in a queue: visible, in flight and delayed.
func (e *Env) queueDepth(ctx context.Context, url string) (int, error) {
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		v, _ := strconv.Atoi(out.Attributes[a])
		n += v
	}
	return n, nil
}
