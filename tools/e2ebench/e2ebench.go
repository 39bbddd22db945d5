// Package e2ebench holds the benchmarks that run junban's binaries end to end: events
// per second from send to commit through both queues (Run), and availability reads while
// an order-worker allocates (RunAPI). docs/performance.md has the commands and figures.
package e2ebench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/internal/testenv/outboundcheck"
	"github.com/junban/junban/migrations"
	"github.com/junban/junban/tools/sendlatency"
)

// Options are the knobs of Run.
type Options struct {
	// Duration is the approximate length of the load phase.
	Duration time.Duration
	// Rate is the events/s of the latency phase (0: half of the capacity the load phase measured).
	Rate float64
	// LatencyDuration is the approximate length of the latency phase (0: half of Duration, at least 10s).
	LatencyDuration time.Duration
	// Workers is the number of order-worker replicas.
	Workers int
	// BinDir is the directory of the binaries ("": fleet.BinDir's default).
	BinDir string
	// JSON prints one JSON object, and no progress.
	JSON bool
	// Profile is a directory for a CPU profile of order-worker-0, every worker's /metrics
	// and Redis commandstats before and after the load ("": none).
	Profile string
	// Outbound runs the benchmark twice in one sitting, the persist-worker's outbound
	// events off and then on (a topic of its own, a queue subscribed to it and drained
	// while the load runs, then checked against the outbox), and prints both side by side.
	Outbound bool
	// Tracing runs the benchmark twice in one sitting, tracing off (no OTEL_* variable
	// reaches the fleet) and then on (every span sent to an OTLP receiver in this
	// process), and prints both side by side with each process's CPU per event.
	Tracing bool

	// env is added to the fleet's environment, after dropEnv's prefixes are taken out of
	// what it inherits.
	env, dropEnv []string
}

// Config is what the benchmarks read from the environment.
type Config struct {
	config.Redis
	config.Postgres
	config.SQS
	// SNSEndpoint is the SNS endpoint beside SQS (fauxqs), for Options.Outbound; empty
	// for AWS.
	SNSEndpoint string `env:"AWS_ENDPOINT_URL_SNS"`
}

// latencyTargetP99 is the send -> commit p99 bench e2e asks of the local stack at its
// fixed rate (half of the capacity the run measured, by default).
const latencyTargetP99 = 250 * time.Millisecond

// Run measures events per second from send to commit in PostgreSQL through both
// queues, with two order-workers and a persist-worker, and in the same run the raw
// send+receive+delete rate of the SQS endpoint; then the send -> commit latency at a
// fixed rate below that capacity, events parked on purpose apart. With o.Outbound it
// measures twice, outbound events off and then on, and prints both side by side; the
// run fails when the outbound check finds a message missing, unknown, out of sequence
// or invalid. With o.Tracing it measures twice, tracing off and then on (runTracing).
func Run(ctx context.Context, cfg Config, o Options, w io.Writer) error {
	if o.Tracing {
		return runTracing(ctx, cfg, o, w)
	}
	if !o.Outbound {
		f, err := measure(ctx, cfg, o, false, 0)
		if err != nil {
			return err
		}
		if o.JSON {
			return json.NewEncoder(w).Encode(f.json())
		}
		f.print(w)
		return nil
	}
	if !o.JSON {
		fmt.Fprintln(os.Stderr, "bench e2e: run 1 of 2: outbound events off")
	}
	off, err := measure(ctx, cfg, o, false, 0)
	if err != nil {
		return err
	}
	if !o.JSON {
		fmt.Fprintln(os.Stderr, "bench e2e: run 2 of 2: outbound events on (a topic, a queue subscribed and drained), the same workload")
	}
	on, err := measure(ctx, cfg, o, true, off.ceiling)
	if err != nil {
		return err
	}
	if o.JSON {
		err = json.NewEncoder(w).Encode(map[string]any{"outbound_off": off.json(), "outbound_on": on.json()})
	} else {
		printSideBySide(w, off, on)
	}
	if err == nil && !on.outbound.OK() {
		err = fmt.Errorf("bench e2e: outbound: %s", strings.Join(on.outbound.Problems(), "; "))
	}
	return err
}

// figures are what one measurement found.
type figures struct {
	s, ls          loadgen.Summary
	ceiling        float64
	latRate        float64
	rateGiven      bool
	inTurn, parked sendlatency.Stats
	latOrders      int
	// outbound is the check of what the subscriber got; nil with outbound events off.
	outbound *outboundcheck.Report
	// cpu is each process's CPU seconds from the start of the load phase to the end of
	// the latency phase.
	cpu []procCPU
}

// measure is one measurement: the load phase and the latency phase, on queues, a schema
// and Redis keys of its own; with outbound, a topic and a subscribed queue of its own too.
func measure(ctx context.Context, cfg Config, o Options, outbound bool, ceiling float64) (*figures, error) {
	d, rate, latDur, workers, binDir, jsonOut, profDir := o.Duration, o.Rate, o.LatencyDuration, o.Workers, o.BinDir, o.JSON, o.Profile
	if latDur == 0 {
		latDur = max(d/2, 10*time.Second)
	}
	bins, err := fleet.BinDir(binDir)
	if err != nil {
		return nil, err
	}
	run := "be" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	logDir, err := os.MkdirTemp("", "junban-bench-e2e-")
	if err != nil {
		return nil, err
	}
	say := func(format string, a ...any) {
		if !jsonOut {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}

	c, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return nil, err
	}
	orders, err := queue.EnsurePair(ctx, c, run+"-orders", run+"-orders-dlq", 5, 30)
	if err != nil {
		return nil, err
	}
	results, err := queue.EnsurePair(ctx, c, run+"-results", run+"-results-dlq", 5, 30)
	if err != nil {
		return nil, err
	}
	ceilingQ, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run + "-ceiling")})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, u := range []string{orders.URL, orders.DLQURL, results.URL, results.DLQURL, aws.ToString(ceilingQ.QueueUrl)} {
			c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()

	// A schema of its own, migrated, dropped afterwards.
	admin, err := cfg.Postgres.Open()
	if err != nil {
		return nil, err
	}
	if err := admin.Exec("CREATE SCHEMA " + run).Error; err != nil {
		return nil, err
	}
	defer admin.Exec("DROP SCHEMA " + run + " CASCADE")
	pgURL := WithSearchPath(cfg.Postgres.URL, run)
	db, err := config.Postgres{URL: pgURL}.Open()
	if err != nil {
		return nil, err
	}
	sqlDB, _ := db.DB()
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return nil, err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return nil, err
	}
	defer func() {
		iter := rc.Scan(context.WithoutCancel(ctx), 0, run+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rc.Del(context.WithoutCancel(ctx), iter.Val())
		}
	}()

	// A second run of one sitting takes the first's ceiling: the same workload, so that
	// its figures compare with the first's.
	if ceiling <= 0 {
		say("bench e2e: measuring the SQS ceiling (%s)", d/3)
		if ceiling, err = loadgen.SQSCeiling(ctx, c, aws.ToString(ceilingQ.QueueUrl), 8, d/3); err != nil {
			return nil, fmt.Errorf("sqs ceiling: %w", err)
		}
	}

	env := []string{
		"JUNBAN_KEY_PREFIX=" + run, "DATABASE_URL=" + pgURL,
		"JUNBAN_ORDERS_QUEUE=" + orders.URL, "JUNBAN_ORDERS_DLQ=" + orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + results.URL, "JUNBAN_RESULTS_DLQ=" + results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
	}
	if profDir != "" {
		env = append(env, "JUNBAN_PPROF=true")
	}
	env = append(env, o.env...)
	var drain *outboundDrain
	if o.Outbound && !outbound {
		// Off means off, whatever the environment the fleet inherits says.
		env = append(env, "JUNBAN_OUTBOX=false", "JUNBAN_OUTBOX_TOPIC_ARN=")
	}
	if outbound {
		if drain, err = startOutbound(ctx, cfg, c, run, db); err != nil {
			return nil, err
		}
		defer drain.close()
		env = append(env, drain.env...)
	}
	var procs []*fleet.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(10 * time.Second)
		}
	}()
	for i := range workers {
		p, err := fleet.StartWith(ctx, bins, "order-worker", fmt.Sprintf("order-worker-%d", i), logDir, env, fleet.Options{DropInherited: o.dropEnv})
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	p, err := fleet.StartWith(ctx, bins, "persist-worker", "persist-worker", logDir, env, fleet.Options{DropInherited: o.dropEnv})
	if err != nil {
		return nil, err
	}
	procs = append(procs, p)

	// Enough orders (about 5 events each) to keep the fleet busy for about d at the
	// rate the target asks for.
	spec := loadgen.DefaultSpec(run)
	spec.Orders = max(100, int(0.4*ceiling/2*d.Seconds()/5))
	spec.SKUs, spec.StockPerLot = 200, 1_000_000
	// The orders alone, all under way from the start, as in the figures of docs/performance.md.
	spec.WarehouseShare, spec.Window = 0, 0
	say("bench e2e: ceiling %.0f msg/s; sending %d orders through %d order-workers and a persist-worker", ceiling, spec.Orders, workers)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: orders.URL})
	if err != nil {
		return nil, err
	}
	defer pub.Stop(context.Background())
	var progress *os.File
	if !jsonOut {
		progress = os.Stderr
	}
	var profiled chan struct{}
	if profDir != "" {
		if err := os.MkdirAll(profDir, 0o755); err != nil {
			return nil, err
		}
		saveCommandStats(ctx, rc, filepath.Join(profDir, "commandstats.before"))
		profiled = make(chan struct{})
		go func() {
			defer close(profiled)
			// Two 8 s profiles from the middle of the load phase (the server's write timeout is 10 s).
			time.Sleep(d / 4)
			for i := range 2 {
				fetch("http://"+procs[0].Addr+"/debug/pprof/profile?seconds=8", filepath.Join(profDir, fmt.Sprintf("order-worker-0.cpu.%d.pprof", i)))
			}
		}()
	}
	workerAddrs := make([]string, workers)
	for i, p := range procs[:workers] {
		workerAddrs[i] = p.Addr
	}
	foundDone := func(ctx context.Context) (int, error) {
		n, err := fleet.MetricSum(ctx, loadgen.DuplicatesFoundSeries, workerAddrs...)
		return int(n), err
	}
	// With outbound on, the emulator also fans every outbound message out to a queue, and
	// the persist-worker writes the outbox: the same workload takes longer to persist.
	wait := 3 * d
	if outbound {
		wait = 8 * d
	}
	cpu0, err := cpuSeconds(ctx, procs)
	if err != nil {
		return nil, err
	}
	s, err := loadgen.Run(ctx, db, pub, loadgen.RunConfig{Spec: spec, Senders: 4, Wait: wait, Progress: progress, DuplicatesFound: foundDone})
	if err != nil {
		return nil, err
	}
	if profDir != "" {
		saveCommandStats(ctx, rc, filepath.Join(profDir, "commandstats.after"))
		for _, p := range procs {
			fetch("http://"+p.Addr+"/metrics", filepath.Join(profDir, p.Name+".metrics"))
		}
		<-profiled
	}
	if s.Missing > 0 {
		return nil, fmt.Errorf("bench e2e: %d events never reached PostgreSQL (logs in %s)", s.Missing, logDir)
	}

	// The latency phase: a workload of its own (new ids and SKUs) at a fixed rate.
	latRate := rate
	if latRate == 0 {
		latRate = s.EventsPerS / 2
	}
	lspec := loadgen.DefaultSpec(run + "l")
	lspec.SKUs, lspec.StockPerLot = 200, 1_000_000
	lspec.WarehouseShare, lspec.Window = 0, 0
	lspec.Orders = max(50, int(latRate*latDur.Seconds()/eventsPerOrder(lspec)))
	say("bench e2e: latency at %.0f events/s for about %s (%d orders)", latRate, latDur, lspec.Orders)
	rec := sendlatency.NewRecorder(pub)
	ls, err := loadgen.Run(ctx, db, rec, loadgen.RunConfig{Spec: lspec, Rate: latRate, Senders: 4, Wait: 3 * latDur, Progress: progress})
	if err != nil {
		return nil, err
	}
	inTurn, parked, missing, err := sendlatency.Split(ctx, db, rec)
	if err != nil {
		return nil, err
	}
	if missing > 0 {
		return nil, fmt.Errorf("bench e2e: latency phase: %d events never reached PostgreSQL (logs in %s)", missing, logDir)
	}
	cpu1, err := cpuSeconds(ctx, procs)
	if err != nil {
		return nil, err
	}
	f := &figures{s: s, ls: ls, ceiling: ceiling, latRate: latRate, rateGiven: rate > 0, inTurn: inTurn, parked: parked, latOrders: lspec.Orders}
	for i, p := range procs {
		f.cpu = append(f.cpu, procCPU{Name: p.Name, Seconds: cpu1[i] - cpu0[i]})
	}
	if drain != nil {
		if f.outbound, err = drain.check(ctx, db); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// json is the figures as bench e2e --json prints them.
func (f *figures) json() map[string]any {
	s, ls := f.s, f.ls
	out := map[string]any{
		"events_per_s":           round1(s.EventsPerS),
		"sqs_ceiling_msgs_per_s": round1(f.ceiling),
		"hops":                   2,
		"p50_ms":                 s.P50MS,
		"p99_ms":                 s.P99MS,
		"events":                 s.Distinct,
		"duplicates_found_done":  *s.DuplicatesFoundDone,
		"elapsed_s":              round1(s.ElapsedS),
		"latency": map[string]any{
			"rate_events_per_s": round1(f.latRate),
			"sent_events_per_s": round1(float64(ls.Sent) / max(ls.ElapsedS, 1e-9)),
			"in_turn":           f.inTurn,
			"parked_on_purpose": f.parked,
			"target_p99_ms":     latencyTargetP99.Milliseconds(),
			"met":               f.latOK(),
			"duplicates_sent":   ls.DuplicatesSent,
			"events_distinct":   ls.Distinct,
			"elapsed_s":         round1(ls.ElapsedS),
			"orders":            f.latOrders,
		},
	}
	if f.outbound != nil {
		out["outbound"] = f.outbound
	}
	return out
}

func (f *figures) latOK() bool { return f.inTurn.P99MS < float64(latencyTargetP99.Milliseconds()) }

// print writes the figures for people.
func (f *figures) print(w io.Writer) {
	s, ceiling, inTurn := f.s, f.ceiling, f.inTurn
	fmt.Fprintf(w, "events (distinct)          %d (%d sent with duplicates)\n", s.Distinct, s.Sent)
	fmt.Fprintf(w, "found done (duplicates)    %d (no effect, nothing published again)\n", *s.DuplicatesFoundDone)
	fmt.Fprintf(w, "events/s send -> commit    %.1f\n", s.EventsPerS)
	fmt.Fprintf(w, "SQS ceiling msg/s          %.1f (send+receive+delete, batches of 10)\n", ceiling)
	fmt.Fprintf(w, "target 0.4 x ceiling / 2   %.1f  -> %s\n", 0.4*ceiling/2, verdict(s.EventsPerS >= 0.4*ceiling/2))
	fmt.Fprintf(w, "latency p50 / p99          %.0f / %.0f ms (at capacity: queueing included)\n", s.P50MS, s.P99MS)
	fmt.Fprintf(w, "\nlatency at %.0f events/s (%s), send -> commit p50 / p95 / p99:\n", f.latRate,
		map[bool]string{true: "-rate", false: "half of the capacity above"}[f.rateGiven])
	fmt.Fprintf(w, "  applied in turn          %s\n", inTurn)
	fmt.Fprintf(w, "  parked on purpose        %s\n", f.parked)
	fmt.Fprintf(w, "                           (sent before their precondition: they wait for the workload's next send)\n")
	fmt.Fprintf(w, "target p99 < %d ms         %.0f ms -> %s\n", latencyTargetP99.Milliseconds(), inTurn.P99MS, verdict(f.latOK()))
}

// eventsPerOrder is how many events (duplicates included) an order of spec sends on
// average, from a sample of its workload.
func eventsPerOrder(spec loadgen.Spec) float64 {
	spec.Orders = 1000
	return float64(len(loadgen.Generate(spec).Events)) / 1000
}

// fetch saves the body of url in path (best effort: a profile is a diagnostic).
func fetch(url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench e2e: profile:", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench e2e: profile:", err)
	}
}

// saveCommandStats saves Redis's INFO commandstats (diff two snapshots; never reset the
// counters of a shared server).
func saveCommandStats(ctx context.Context, rc redis.UniversalClient, path string) {
	if info, err := rc.Info(ctx, "commandstats").Result(); err == nil {
		if err := os.WriteFile(path, []byte(info), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "bench e2e: commandstats:", err)
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// WithSearchPath adds a search_path parameter to a PostgreSQL URL.
func WithSearchPath(url, schema string) string {
	sep := "?"
	for _, r := range url {
		if r == '?' {
			sep = "&"
		}
	}
	return url + sep + "search_path=" + schema
}

// round1 rounds f to one decimal.
func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// randomID is 10 random hex digits.
func randomID() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}
