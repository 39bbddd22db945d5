// Package costbench measures what one event costs end to end (junbanlab bench cost): each
// junban process's CPU, Redis's CPU and commands, the SQS requests by queue and action
// with the messages each carried, PostgreSQL's transactions and rows, per distinct event
// of a demo-shaped load at a fixed rate; and the SQS requests of an idle fleet.
// docs/performance.md, "bench cost", has the method and the figures.
package costbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/migrations"
	"github.com/junban/junban/tools/e2ebench"
	"github.com/junban/junban/tools/sendlatency"
)

// Options are the knobs of Run.
type Options struct {
	// Rate is the events/s offered (duplicates included).
	Rate float64
	// Orders and SKUs size the workload (the demo's shape otherwise: Spec).
	Orders, SKUs int
	// Workers is the number of order-worker replicas (beside one persist-worker).
	Workers int
	// Idle is how long the idle fleet runs at JUNBAN_SQS_WAIT_SECONDS=20 after the load;
	// 0 skips it.
	Idle time.Duration
	// Wait bounds the wait for every event's result in PostgreSQL.
	Wait time.Duration
	// BinDir is the directory of the binaries ("": fleet.BinDir's default).
	BinDir string
	// JSON prints one JSON object, and no progress.
	JSON bool
	// Profile, when set, is a directory for a CPU profile of each process of the loaded
	// fleet over ProfileFor from the first send (the fleet runs with JUNBAN_PPROF=true,
	// which the order-workers pay for in debug counters: profile and measure in separate
	// runs).
	Profile string
	// ProfileFor is how long each profile runs (20 s when zero).
	ProfileFor time.Duration
	// Runs is how many times the load (and the idle phase) runs, each on queues, a
	// schema and a prefix of its own; beyond one, the headline figures' distribution
	// follows the runs (Summary). 0 counts as 1.
	Runs int
	// BaselineBin, when set, is the directory of another tree's order-worker and
	// persist-worker (issue 34's baseline: make bench-cost-baseline builds them). Each run
	// then runs them too, on the same load just before or after (BaselineFirst), and the
	// summary gives each figure as a ratio to theirs: what CPU an event costs moves with
	// the machine and its hour, a ratio of one sitting less, while the machine holds.
	BaselineBin string
}

// Defaults are the demo-shaped load: 300 events/s offered, 2,000 orders, 40 SKUs,
// two order-workers, an idle minute.
func Defaults() Options {
	return Options{Rate: 300, Orders: 2000, SKUs: 40, Workers: 2, Idle: time.Minute, Wait: 5 * time.Minute, Runs: 1}
}

// Config is what the benchmark reads from the environment.
type Config struct {
	config.Redis
	config.Postgres
	config.SQS
}

// Spec is the workload: the demo's (scripts/demo.sh) without its webhooks, SNS share and
// allocation moves, sized by o.
func Spec(run string, o Options) loadgen.Spec {
	s := loadgen.DefaultSpec(run)
	s.Orders, s.SKUs = o.Orders, o.SKUs
	s.LotsPerSKU, s.StockPerLot, s.SafetyStock, s.SKUSkew = 4, 180, 10, 0.6
	s.WarehouseShare, s.DuplicateShare, s.OutOfOrderShare, s.ShuffleShare = 0.04, 0.2, 0.2, 0.1
	// No order.allocation_moved: a baseline fleet older than that event refuses it.
	s.MoveShare = 0
	return s
}

// Run runs the load, then the idle fleet, and prints the figures to w; with
// o.BaselineBin, each run beside the baseline's.
func Run(ctx context.Context, cfg Config, o Options, w io.Writer) error {
	n := max(o.Runs, 1)
	results := make([]*Result, 0, n)
	var baselines []*Result
	for i := range n {
		r, base, err := runPair(ctx, cfg, o, i)
		if err != nil {
			return fmt.Errorf("run %d of %d: %w", i+1, n, err)
		}
		results = append(results, r)
		if base != nil {
			baselines = append(baselines, base)
		}
		if !o.JSON {
			if n > 1 {
				fmt.Fprintf(w, "\n== run %d of %d\n", i+1, n)
			}
			r.print(w)
			if base != nil {
				fmt.Fprintf(w, "\nthe baseline's fleet (%s), the same load:\n", o.BaselineBin)
				base.print(w)
			}
			printPath(w, r, base)
		}
	}
	if o.JSON {
		return writeJSON(w, results, baselines)
	}
	if n > 1 || baselines != nil {
		Summarize(results, baselines).print(w)
	}
	return nil
}

// BaselineFirst tells whether run i (from 0) runs the baseline's fleet before the tree's:
// in every other run, so that neither has the sitting's earlier minutes every time.
func BaselineFirst(i int) bool { return i%2 == 0 }

// runPair is run i: the tree's fleet, and with o.BaselineBin the baseline's on the same
// load (without an idle phase or a profile: those are the tree's).
func runPair(ctx context.Context, cfg Config, o Options, i int) (r, base *Result, err error) {
	if o.BaselineBin == "" {
		r, err = runOnce(ctx, cfg, o)
		return r, nil, err
	}
	bo := o
	bo.BinDir, bo.Idle, bo.Profile = o.BaselineBin, 0, ""
	tree := func() (err error) { r, err = runOnce(ctx, cfg, o); return err }
	baseline := func() (err error) {
		if base, err = runOnce(ctx, cfg, bo); err != nil {
			return fmt.Errorf("the baseline's fleet: %w", err)
		}
		return nil
	}
	steps := []func() error{tree, baseline}
	if BaselineFirst(i) {
		steps[0], steps[1] = baseline, tree
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, nil, err
		}
	}
	return r, base, nil
}

// runOnce is one run: the load, then the idle phase.
func runOnce(ctx context.Context, cfg Config, o Options) (*Result, error) {
	e, err := setUp(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	r, err := e.load(ctx, o)
	if err != nil {
		return nil, err
	}
	if o.Idle > 0 {
		if r.Idle, err = e.idle(ctx, o); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// env is one run's queues, schema and Redis prefix, shared by its load and idle phases.
type env struct {
	run, bins, logDir string
	c                 *sqs.Client
	producer          *prometheus.Registry // c's SQS counters
	orders, results   queue.Pair
	rc                redis.UniversalClient
	admin, db         *gorm.DB
	fleetEnv          []string
	say               func(format string, a ...any)
	cleanup           []func()
}

func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

func setUp(ctx context.Context, cfg Config, o Options) (_ *env, err error) {
	e := &env{run: "bc" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	e.say = func(format string, a ...any) {
		if !o.JSON {
			fmt.Fprintf(os.Stderr, "bench cost: "+format+"\n", a...)
		}
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.bins, err = fleet.BinDir(o.BinDir); err != nil {
		return nil, err
	}
	if e.logDir, err = os.MkdirTemp("", "junban-bench-cost-"); err != nil {
		return nil, err
	}
	e.producer = prometheus.NewRegistry()
	if e.c, err = queue.NewClient(ctx, cfg.SQS, queue.CountRequests(e.producer)); err != nil {
		return nil, err
	}
	if e.orders, err = queue.EnsurePair(ctx, e.c, e.run+"-orders", e.run+"-orders-dlq", 5, 30); err != nil {
		return nil, err
	}
	if e.results, err = queue.EnsurePair(ctx, e.c, e.run+"-results", e.run+"-results-dlq", 5, 30); err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, func() {
		for _, u := range []string{e.orders.URL, e.orders.DLQURL, e.results.URL, e.results.DLQURL} {
			_, _ = e.c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	if err := e.openStores(ctx, cfg); err != nil {
		return nil, err
	}
	e.fleetEnv = []string{
		"JUNBAN_KEY_PREFIX=" + e.run, "DATABASE_URL=" + e2ebench.WithSearchPath(cfg.Postgres.URL, e.run),
		"JUNBAN_ORDERS_QUEUE=" + e.orders.URL, "JUNBAN_ORDERS_DLQ=" + e.orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + e.results.URL, "JUNBAN_RESULTS_DLQ=" + e.results.DLQURL,
		"JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
	}
	return e, nil
}

// openStores makes the run's schema (migrated, dropped afterwards) and opens Redis.
func (e *env) openStores(ctx context.Context, cfg Config) (err error) {
	if e.admin, err = cfg.Postgres.Open(); err != nil {
		return err
	}
	if err := e.admin.Exec("CREATE SCHEMA " + e.run).Error; err != nil {
		return err
	}
	e.cleanup = append(e.cleanup, func() { e.admin.Exec("DROP SCHEMA " + e.run + " CASCADE") })
	if e.db, err = (config.Postgres{URL: e2ebench.WithSearchPath(cfg.Postgres.URL, e.run)}).Open(); err != nil {
		return err
	}
	sqlDB, _ := e.db.DB()
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return err
	}
	if e.rc, err = cfg.Redis.Client(); err != nil {
		return err
	}
	e.cleanup = append(e.cleanup, func() {
		ctx := context.WithoutCancel(ctx)
		iter := e.rc.Scan(ctx, 0, e.run+"*", 1000).Iterator()
		for iter.Next(ctx) {
			e.rc.Del(ctx, iter.Val())
		}
	})
	return nil
}

// startFleet starts the order-workers and the persist-worker with the run's environment
// and waitSeconds; stop stops them.
func (e *env) startFleet(ctx context.Context, workers, waitSeconds int, extra ...string) (procs []*fleet.Proc, stop func(), err error) {
	stop = func() {
		for _, p := range procs {
			_ = p.Stop(10 * time.Second) // best effort: the figures are taken
		}
	}
	env := append(append([]string(nil), e.fleetEnv...), "JUNBAN_SQS_WAIT_SECONDS="+strconv.Itoa(waitSeconds))
	env = append(env, extra...)
	for i := range workers + 1 {
		bin, name := "order-worker", fmt.Sprintf("order-worker-%d", i)
		if i == workers {
			bin, name = "persist-worker", "persist-worker"
		}
		p, err := fleet.Start(ctx, e.bins, bin, name, e.logDir, env)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, p)
	}
	return procs, stop, nil
}

// load runs the workload at o.Rate through a fleet at JUNBAN_SQS_WAIT_SECONDS=1 and
// measures the counters' deltas from just before the first send to the last result in
// PostgreSQL.
func (e *env) load(ctx context.Context, o Options) (*Result, error) {
	var extra []string
	if o.Profile != "" {
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return nil, fmt.Errorf("profile directory: %w", err)
		}
		extra = append(extra, "JUNBAN_PPROF=true")
	}
	procs, stop, err := e.startFleet(ctx, o.Workers, 1, extra...)
	if err != nil {
		return nil, err
	}
	defer stop()
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: e.c, QueueURL: e.orders.URL})
	if err != nil {
		return nil, err
	}
	defer func() { _ = pub.Stop(context.WithoutCancel(ctx)) }()
	var progress io.Writer
	if !o.JSON {
		progress = os.Stderr
	}
	spec := Spec(e.run, o)
	e.say("%d orders, %d SKUs, %.0f events/s offered, %d order-workers and a persist-worker from %s (logs in %s)", spec.Orders, spec.SKUs, o.Rate, o.Workers, e.bins, e.logDir)
	rec := sendlatency.NewRecorder(pub)
	before, err := take(ctx, procs, e)
	if err != nil {
		return nil, err
	}
	profiled := e.profile(ctx, procs, o)
	defer profiled()
	s, err := loadgen.Run(ctx, e.db, rec, loadgen.RunConfig{Spec: spec, Rate: o.Rate, Senders: 4, Wait: o.Wait, Progress: progress})
	if err != nil {
		return nil, err
	}
	after, err := take(ctx, procs, e)
	if err != nil {
		return nil, err
	}
	e.saveMetrics(ctx, procs, o)
	// A backend reports its row counts to pg_stat_database at most once a second, and
	// may hold them for ten (PostgreSQL's PGSTAT_IDLE_INTERVAL); on exit it reports
	// them all. The fleet's backends end with the fleet (once its profiles are in), and
	// the rows are read after.
	profiled()
	stop()
	if after.pg, err = settledPGStats(ctx, e.db); err != nil {
		return nil, err
	}
	if s.Missing > 0 {
		return nil, fmt.Errorf("bench cost: %d events never reached PostgreSQL (logs in %s)", s.Missing, e.logDir)
	}
	inTurn, _, missing, err := sendlatency.Split(ctx, e.db, rec)
	if err != nil {
		return nil, err
	}
	if missing > 0 {
		return nil, fmt.Errorf("bench cost: %d events without an inbox row (logs in %s)", missing, e.logDir)
	}
	return newResult(o, s, before, after, inTurn), nil
}

// idle runs a fresh fleet at JUNBAN_SQS_WAIT_SECONDS=20 on the run's (now empty) queues
// for o.Idle and counts its SQS requests.
func (e *env) idle(ctx context.Context, o Options) (*IdleResult, error) {
	e.say("the fleet idle at JUNBAN_SQS_WAIT_SECONDS=20 for %s", o.Idle)
	procs, stop, err := e.startFleet(ctx, o.Workers, 20)
	if err != nil {
		return nil, err
	}
	defer stop()
	before, err := take(ctx, procs, e)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(o.Idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	after, err := take(ctx, procs, e)
	if err != nil {
		return nil, err
	}
	return newIdleResult(o, before, after), nil
}

// profile starts a CPU profile of each of procs into o.Profile (nothing without it); the
// function it returns waits for them. A failed profile is reported, not fatal: the
// figures do not depend on it.
func (e *env) profile(ctx context.Context, procs []*fleet.Proc, o Options) (wait func()) {
	if o.Profile == "" {
		return func() {}
	}
	d := o.ProfileFor
	if d <= 0 {
		d = 20 * time.Second
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			path := filepath.Join(o.Profile, p.Name+".cpu.pprof")
			if err := fetchProfile(ctx, p.Addr, d, path); err != nil {
				e.say("profile of %s: %v", p.Name, err)
				return
			}
			e.say("CPU profile of %s over %s: %s", p.Name, d, path)
		})
	}
	return wg.Wait
}

// saveMetrics saves each process's /metrics into o.Profile (nothing without it), for the
// debug counters of JUNBAN_PPROF (Redis round trips and SQS calls by command).
func (e *env) saveMetrics(ctx context.Context, procs []*fleet.Proc, o Options) {
	if o.Profile == "" {
		return
	}
	for _, p := range procs {
		path := filepath.Join(o.Profile, p.Name+".metrics.txt")
		if err := fetch(ctx, "http://"+p.Addr+"/metrics", path); err != nil {
			e.say("metrics of %s: %v", p.Name, err)
		}
	}
}

// fetchProfile saves the CPU profile over d of the process whose admin listener is addr.
func fetchProfile(ctx context.Context, addr string, d time.Duration, path string) error {
	return fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())), path)
}

// fetch saves the body of a GET of url to path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
