package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/fleet"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/loadgen"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/migrations"
)

type benchE2EConfig struct {
	config.Redis
	config.Postgres
	config.SQS
}

// latencyTargetP99 is the send -> commit p99 bench e2e asks of the local stack at its
// fixed rate (half of the capacity the run measured, by default).
const latencyTargetP99 = 250 * time.Millisecond

// runBenchE2E measures events per second from send to commit in PostgreSQL through both
// queues, with two order-workers and a persist-worker, and in the same run the raw
// send+receive+delete rate of the SQS endpoint; then the send -> commit latency at a
// fixed rate below that capacity, events parked on purpose apart.
func runBenchE2E(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench e2e", flag.ContinueOnError)
	d := fs.Duration("duration", 60*time.Second, "approximate length of the load phase")
	rate := fs.Float64("rate", 0, "events/s of the latency phase (0: half of the capacity the load phase measured)")
	latDur := fs.Duration("latency-duration", 0, "approximate length of the latency phase (0: half of -duration, at least 10s)")
	workers := fs.Int("workers", 2, "order-worker replicas")
	binDir := fs.String("bin", "", "directory of the binaries (default: beside junbanctl)")
	jsonOut := fs.Bool("json", false, "print one JSON object")
	profDir := fs.String("profile", "", "directory for a CPU profile of order-worker-0, every worker's /metrics and Redis commandstats before and after the load")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *rate < 0 || *latDur < 0 || *d <= 0 {
		return fmt.Errorf("%w: -duration must be positive, -rate and -latency-duration not negative", errUsage)
	}
	if *latDur == 0 {
		*latDur = max(*d/2, 10*time.Second)
	}
	cfg, err := config.Load[benchE2EConfig]()
	if err != nil {
		return err
	}
	bins, err := fleet.BinDir(*binDir)
	if err != nil {
		return err
	}
	run := "be" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	logDir, err := os.MkdirTemp("", "junban-bench-e2e-")
	if err != nil {
		return err
	}
	say := func(format string, a ...any) {
		if !*jsonOut {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}

	c, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return err
	}
	orders, err := queue.EnsurePair(ctx, c, run+"-orders", run+"-orders-dlq", 5, 30)
	if err != nil {
		return err
	}
	results, err := queue.EnsurePair(ctx, c, run+"-results", run+"-results-dlq", 5, 30)
	if err != nil {
		return err
	}
	ceilingQ, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run + "-ceiling")})
	if err != nil {
		return err
	}
	defer func() {
		for _, u := range []string{orders.URL, orders.DLQURL, results.URL, results.DLQURL, aws.ToString(ceilingQ.QueueUrl)} {
			c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()

	// A schema of its own, migrated, dropped afterwards.
	admin, err := cfg.Postgres.Open()
	if err != nil {
		return err
	}
	if err := admin.Exec("CREATE SCHEMA " + run).Error; err != nil {
		return err
	}
	defer admin.Exec("DROP SCHEMA " + run + " CASCADE")
	pgURL := withSearchPath(cfg.Postgres.URL, run)
	db, err := config.Postgres{URL: pgURL}.Open()
	if err != nil {
		return err
	}
	sqlDB, _ := db.DB()
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer func() {
		iter := rc.Scan(context.WithoutCancel(ctx), 0, run+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rc.Del(context.WithoutCancel(ctx), iter.Val())
		}
	}()

	say("bench e2e: measuring the SQS ceiling (%s)", *d/3)
	ceiling, err := loadgen.SQSCeiling(ctx, c, aws.ToString(ceilingQ.QueueUrl), 8, *d/3)
	if err != nil {
		return fmt.Errorf("sqs ceiling: %w", err)
	}

	env := []string{
		"JUNBAN_KEY_PREFIX=" + run, "DATABASE_URL=" + pgURL,
		"JUNBAN_ORDERS_QUEUE=" + orders.URL, "JUNBAN_ORDERS_DLQ=" + orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + results.URL, "JUNBAN_RESULTS_DLQ=" + results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
	}
	if *profDir != "" {
		env = append(env, "JUNBAN_PPROF=true")
	}
	var procs []*fleet.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(10 * time.Second)
		}
	}()
	for i := range *workers {
		p, err := fleet.Start(ctx, bins, "order-worker", fmt.Sprintf("order-worker-%d", i), logDir, env)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	p, err := fleet.Start(ctx, bins, "persist-worker", "persist-worker", logDir, env)
	if err != nil {
		return err
	}
	procs = append(procs, p)

	// Enough orders (about 5 events each) to keep the fleet busy for about d at the
	// rate the target asks for.
	spec := loadgen.DefaultSpec(run)
	spec.Orders = max(100, int(0.4*ceiling/2*d.Seconds()/5))
	spec.SKUs, spec.StockPerLot = 200, 1_000_000
	// The orders alone, all under way from the start, as in the figures of docs/benchmarks.md.
	spec.WarehouseShare, spec.Window = 0, 0
	say("bench e2e: ceiling %.0f msg/s; sending %d orders through %d order-workers and a persist-worker", ceiling, spec.Orders, *workers)
	pub, err := queue.NewPublisher(c, queue.PublisherConfig{QueueURL: orders.URL})
	if err != nil {
		return err
	}
	defer pub.Close()
	var progress *os.File
	if !*jsonOut {
		progress = os.Stderr
	}
	var profiled chan struct{}
	if *profDir != "" {
		if err := os.MkdirAll(*profDir, 0o755); err != nil {
			return err
		}
		saveCommandStats(ctx, rc, filepath.Join(*profDir, "commandstats.before"))
		profiled = make(chan struct{})
		go func() {
			defer close(profiled)
			// Two 8 s profiles from the middle of the load phase (the server's write timeout is 10 s).
			time.Sleep(*d / 4)
			for i := range 2 {
				fetch("http://"+procs[0].Addr+"/debug/pprof/profile?seconds=8", filepath.Join(*profDir, fmt.Sprintf("order-worker-0.cpu.%d.pprof", i)))
			}
		}()
	}
	workerAddrs := make([]string, *workers)
	for i, p := range procs[:*workers] {
		workerAddrs[i] = p.Addr
	}
	foundDone := func(ctx context.Context) (int, error) {
		n, err := fleet.MetricSum(ctx, loadgen.DuplicatesFoundSeries, workerAddrs...)
		return int(n), err
	}
	s, err := loadgen.Run(ctx, db, pub, loadgen.RunConfig{Spec: spec, Senders: 4, Wait: 3 * *d, Progress: progress, DuplicatesFound: foundDone})
	if err != nil {
		return err
	}
	if *profDir != "" {
		saveCommandStats(ctx, rc, filepath.Join(*profDir, "commandstats.after"))
		for _, p := range procs {
			fetch("http://"+p.Addr+"/metrics", filepath.Join(*profDir, p.Name+".metrics"))
		}
		<-profiled
	}
	if s.Missing > 0 {
		return fmt.Errorf("bench e2e: %d events never reached PostgreSQL (logs in %s)", s.Missing, logDir)
	}

	// The latency phase: a workload of its own (new ids and SKUs) at a fixed rate.
	latRate := *rate
	if latRate == 0 {
		latRate = s.EventsPerS / 2
	}
	lspec := loadgen.DefaultSpec(run + "l")
	lspec.SKUs, lspec.StockPerLot = 200, 1_000_000
	lspec.WarehouseShare, lspec.Window = 0, 0
	lspec.Orders = max(50, int(latRate*latDur.Seconds()/eventsPerOrder(lspec)))
	say("bench e2e: latency at %.0f events/s for about %s (%d orders)", latRate, *latDur, lspec.Orders)
	rec := newSendRecorder(pub)
	ls, err := loadgen.Run(ctx, db, rec, loadgen.RunConfig{Spec: lspec, Rate: latRate, Senders: 4, Wait: 3 * *latDur, Progress: progress})
	if err != nil {
		return err
	}
	inTurn, parked, missing, err := latencySplit(ctx, db, rec)
	if err != nil {
		return err
	}
	if missing > 0 {
		return fmt.Errorf("bench e2e: latency phase: %d events never reached PostgreSQL (logs in %s)", missing, logDir)
	}
	latOK := inTurn.P99MS < float64(latencyTargetP99.Milliseconds())
	out := map[string]any{
		"events_per_s":           round1(s.EventsPerS),
		"sqs_ceiling_msgs_per_s": round1(ceiling),
		"hops":                   2,
		"p50_ms":                 s.P50MS,
		"p99_ms":                 s.P99MS,
		"events":                 s.Distinct,
		"duplicates_found_done":  *s.DuplicatesFoundDone,
		"elapsed_s":              round1(s.ElapsedS),
		"latency": map[string]any{
			"rate_events_per_s": round1(latRate),
			"sent_events_per_s": round1(float64(ls.Sent) / max(ls.ElapsedS, 1e-9)),
			"in_turn":           inTurn,
			"parked_on_purpose": parked,
			"target_p99_ms":     latencyTargetP99.Milliseconds(),
			"met":               latOK,
			"duplicates_sent":   ls.DuplicatesSent,
			"events_distinct":   ls.Distinct,
			"elapsed_s":         round1(ls.ElapsedS),
			"orders":            lspec.Orders,
		},
	}
	if *jsonOut {
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	fmt.Printf("events (distinct)          %d (%d sent with duplicates)\n", s.Distinct, s.Sent)
	fmt.Printf("found done (duplicates)    %d (no effect, nothing published again)\n", *s.DuplicatesFoundDone)
	fmt.Printf("events/s send -> commit    %.1f\n", s.EventsPerS)
	fmt.Printf("SQS ceiling msg/s          %.1f (send+receive+delete, batches of 10)\n", ceiling)
	fmt.Printf("target 0.4 x ceiling / 2   %.1f  -> %s\n", 0.4*ceiling/2, verdict(s.EventsPerS >= 0.4*ceiling/2))
	fmt.Printf("latency p50 / p99          %.0f / %.0f ms (at capacity: queueing included)\n", s.P50MS, s.P99MS)
	fmt.Printf("\nlatency at %.0f events/s (%s), send -> commit p50 / p95 / p99:\n", latRate,
		map[bool]string{true: "-rate", false: "half of the capacity above"}[*rate > 0])
	fmt.Printf("  applied in turn          %s\n", inTurn)
	fmt.Printf("  parked on purpose        %s\n", parked)
	fmt.Printf("                           (sent before their precondition: they wait for the workload's next send)\n")
	fmt.Printf("target p99 < %d ms         %.0f ms -> %s\n", latencyTargetP99.Milliseconds(), inTurn.P99MS, verdict(latOK))
	return nil
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
	os.WriteFile(path, b, 0o644)
}

// saveCommandStats saves Redis's INFO commandstats (diff two snapshots; never reset the
// counters of a shared server).
func saveCommandStats(ctx context.Context, rc redis.UniversalClient, path string) {
	if info, err := rc.Info(ctx, "commandstats").Result(); err == nil {
		os.WriteFile(path, []byte(info), 0o644)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// withSearchPath adds a search_path parameter to a PostgreSQL URL.
func withSearchPath(url, schema string) string {
	sep := "?"
	for _, r := range url {
		if r == '?' {
			sep = "&"
		}
	}
	return url + sep + "search_path=" + schema
}

// sendRecorder passes order events on to the orders queue (or the gateway) and notes when
// each event was first sent, in sending order: the start of its send -> commit latency,
// and the stream parkedOnPurpose replays.
type sendRecorder struct {
	pub   loadgen.Publisher
	mu    sync.Mutex
	first map[string]time.Time
	order []event.Order
}

func newSendRecorder(pub loadgen.Publisher) *sendRecorder {
	return &sendRecorder{pub: pub, first: map[string]time.Time{}}
}

func (r *sendRecorder) note(ev event.Order, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.first[ev.EventID]; ok {
		return // a duplicate delivery: its latency is the original's
	}
	r.first[ev.EventID] = at
	r.order = append(r.order, ev)
}

// PublishBatch notes the bodies' events, then sends them.
func (r *sendRecorder) PublishBatch(ctx context.Context, bodies [][]byte) error {
	now := time.Now()
	for _, b := range bodies {
		var ev event.Order
		if err := json.Unmarshal(b, &ev); err == nil {
			r.note(ev, now)
		}
	}
	return r.pub.PublishBatch(ctx, bodies)
}

// webhook notes each event sent through the gateway, then sends it.
func (r *sendRecorder) webhook(next loadgen.Webhook) loadgen.Webhook {
	return func(ctx context.Context, pid string, ev event.Order) (int, error) {
		r.note(ev, time.Now())
		return next(ctx, pid, ev)
	}
}

// parkedOnPurpose replays the events in the order they were sent, as one order's turn
// sees them, and returns those whose precondition did not hold when they arrived: a
// payment, line change, allocation or cancellation before the placement, a shipment
// before the payment or (reserve mode) the allocation. The order-worker parks them until
// the precondition holds, so their send -> commit time is the workload's gap between
// the two sends, not junban's latency.
func parkedOnPurpose(sent []event.Order) map[string]bool {
	type orderState struct {
		placed, paid, allocated, finished bool
		waiting                           []event.Order
	}
	orders := map[string]*orderState{}
	parked := map[string]bool{}
	// applies answers whether ev applies now, and applies it.
	applies := func(st *orderState, ev event.Order) bool {
		if st.finished {
			return true // rejected at once: not parked
		}
		switch ev.Type {
		case event.OrderPlaced:
			if !st.placed {
				var d event.OrderData
				json.Unmarshal(ev.Data, &d)
				st.placed, st.allocated = true, d.Mode != ledger.ModeReserve
			}
		case event.PaymentConfirmed, event.OrderLinesChanged, event.OrderAllocateForShipment, event.OrderCancelled:
			if !st.placed {
				return false
			}
			st.paid = st.paid || ev.Type == event.PaymentConfirmed
			st.allocated = st.allocated || ev.Type == event.OrderAllocateForShipment
			st.finished = ev.Type == event.OrderCancelled
		case event.OrderShipped:
			if !st.placed || !st.paid || !st.allocated {
				return false
			}
			st.finished = true
		}
		return true
	}
	for _, ev := range sent {
		st := orders[ev.LCID]
		if st == nil {
			st = &orderState{}
			orders[ev.LCID] = st
		}
		if !applies(st, ev) {
			parked[ev.EventID] = true
			st.waiting = append(st.waiting, ev)
			continue
		}
		// Every applied event may be the precondition a parked one waited for.
		for progress := true; progress; {
			progress = false
			for i := 0; i < len(st.waiting); i++ {
				if applies(st, st.waiting[i]) {
					st.waiting = slices.Delete(st.waiting, i, i+1)
					progress = true
					break
				}
			}
		}
	}
	return parked
}

// latencyStats are send -> commit percentiles of a set of events.
type latencyStats struct {
	Events int     `json:"events"`
	P50MS  float64 `json:"p50_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	MaxMS  float64 `json:"max_ms"`
}

func statsOf(lat []time.Duration) latencyStats {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
	}
	return latencyStats{Events: len(lat), P50MS: pct(0.50), P95MS: pct(0.95), P99MS: pct(0.99), MaxMS: pct(1)}
}

func (l latencyStats) String() string {
	return fmt.Sprintf("%.0f / %.0f / %.0f ms (max %.0f, %d events)", l.P50MS, l.P95MS, l.P99MS, l.MaxMS, l.Events)
}

// latencySplit reads the commit time of every event r sent from the inbox and returns
// the send -> commit latencies of the events that applied in turn and, apart, of those
// parked on purpose; missing counts events without an inbox row.
func latencySplit(ctx context.Context, db *gorm.DB, r *sendRecorder) (inTurn, parked latencyStats, missing int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.order))
	for _, ev := range r.order {
		ids = append(ids, ev.EventID)
	}
	committed := make(map[string]time.Time, len(ids))
	// In chunks: PostgreSQL takes at most 65535 parameters in one statement.
	for i := 0; i < len(ids); i += 10000 {
		var rows []struct {
			EventID     string
			CommittedAt time.Time
		}
		if err := db.WithContext(ctx).Raw(`SELECT event_id, committed_at FROM inbox WHERE event_id IN ?`, ids[i:min(i+10000, len(ids))]).Scan(&rows).Error; err != nil {
			return inTurn, parked, 0, fmt.Errorf("latency: inbox: %w", err)
		}
		for _, row := range rows {
			committed[row.EventID] = row.CommittedAt
		}
	}
	onPurpose := parkedOnPurpose(r.order)
	var a, b []time.Duration
	for _, id := range ids {
		at, ok := committed[id]
		if !ok {
			missing++
			continue
		}
		if onPurpose[id] {
			b = append(b, at.Sub(r.first[id]))
		} else {
			a = append(a, at.Sub(r.first[id]))
		}
	}
	return statsOf(a), statsOf(b), missing, nil
}
