// Package expirybench measures how soon junban expires reservations: thousands of reserve
// orders whose holds end at one instant, under a background load at the demo's rate, and
// the delay from that instant to each release committed in PostgreSQL (the inbox's
// committed_at of the order.reservation_expired result), beside the in-turn latency of the
// ordinary events sent in the same run. docs/performance.md, "Expiry timeliness", has the
// command and the figures.
package expirybench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/migrations"
	"github.com/junban/junban/tools/e2ebench"
	"github.com/junban/junban/tools/sendlatency"
)

// Defaults of Options.
const (
	// HoldsDefault reserve orders expire at one instant.
	HoldsDefault = 3000
	// RateDefault is the background load's events/s: the demo's (scripts/demo.sh).
	RateDefault = 250
	// LeadDefault is the time from the first placement to the holds' end: enough to
	// place and persist every hold first.
	LeadDefault = 45 * time.Second
	// WaitDefault bounds the wait for the expiries after the holds' end.
	WaitDefault = 3 * time.Minute
)

// Options are the knobs of Run.
type Options struct {
	// Holds is how many reserve orders expire at one instant.
	Holds int
	// Rate is the background load's events/s (0: none).
	Rate float64
	// Lead is the time from the first placement to the holds' end.
	Lead time.Duration
	// Wait bounds the wait for every expiry after the holds' end.
	Wait time.Duration
	// Workers is the number of order-worker replicas.
	Workers int
	// BinDir is the directory of the binaries ("": fleet.BinDir's default).
	BinDir string
	// JSON prints one JSON object, and no progress.
	JSON bool
}

// Report is what a run found.
type Report struct {
	Holds   int     `json:"holds"`
	Workers int     `json:"workers"`
	Rate    float64 `json:"background_events_per_s"`
	// Expired counts the holds whose expiry was committed within Options.Wait.
	Expired int `json:"expired"`
	// Delay is from the holds' end to each expiry's commit in PostgreSQL.
	Delay sendlatency.Stats `json:"delay"`
	// Background is the send -> commit latency of the background's events applied in
	// turn, in the same run: the baseline an expiry's delay compares with.
	Background sendlatency.Stats `json:"background_in_turn"`
	// PlaceS is how long placing (and persisting) the holds took.
	PlaceS float64 `json:"place_s"`
}

// Run starts a fleet on queues, a schema and Redis keys of its own, places o.Holds
// reserve orders whose holds end at one instant while a background workload runs at
// o.Rate, and reports the delay from that instant to each expiry committed.
func Run(ctx context.Context, cfg e2ebench.Config, o Options, w io.Writer) error {
	say := func(format string, a ...any) {
		if !o.JSON {
			fmt.Fprintf(os.Stderr, "bench expiry: "+format+"\n", a...)
		}
	}
	run := "bx" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	f, cleanup, err := startFleet(ctx, cfg, o, run)
	defer cleanup()
	if err != nil {
		return err
	}
	rep := Report{Holds: o.Holds, Workers: o.Workers, Rate: o.Rate}

	// The background: the demo's workload at its rate, for as long as the holds take.
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	rec := sendlatency.NewRecorder(f.pub)
	bgDone := make(chan error, 1)
	if o.Rate > 0 {
		spec := loadgen.DefaultSpec(run + "b")
		spec.Orders = max(50, int(o.Rate*(o.Lead+o.Wait/3).Seconds()/5))
		go func() {
			_, err := loadgen.Run(bgCtx, f.db, rec, loadgen.RunConfig{Spec: spec, Rate: o.Rate, Senders: 4, Wait: o.Wait})
			bgDone <- err
		}()
	} else {
		bgDone <- nil
	}

	start := time.Now()
	end := start.Add(o.Lead).UTC().Truncate(time.Microsecond)
	say("placing %d reserve orders whose holds end at %s", o.Holds, end.Format(time.RFC3339Nano))
	lcids, err := placeHolds(ctx, f, run, o.Holds, end)
	if err != nil {
		return err
	}
	if err := awaitCount(ctx, f.db, `SELECT count(*) FROM orders WHERE lcid IN ? AND hold_until IS NOT NULL`, lcids, end); err != nil {
		return fmt.Errorf("bench expiry: the holds were not all placed before they end (raise -lead): %w", err)
	}
	rep.PlaceS = time.Since(start).Seconds()
	say("placed in %.1fs; waiting for the expiries", rep.PlaceS)
	if err := awaitCount(ctx, f.db, `SELECT count(*) FROM orders WHERE lcid IN ? AND status = 'expired'`, lcids, end.Add(o.Wait)); err != nil {
		say("%v", err)
	}
	if rep.Expired, rep.Delay, err = delays(ctx, f.db, lcids, end); err != nil {
		return err
	}
	stopBG()
	if err := <-bgDone; err != nil && ctx.Err() == nil && bgCtx.Err() == nil {
		return fmt.Errorf("bench expiry: background: %w", err)
	}
	if rep.Background, _, _, err = sendlatency.Split(ctx, f.db, rec); err != nil {
		return err
	}
	if o.JSON {
		return json.NewEncoder(w).Encode(rep)
	}
	rep.print(w)
	if rep.Expired < rep.Holds {
		return fmt.Errorf("bench expiry: %d of %d holds expired within %s", rep.Expired, rep.Holds, o.Wait)
	}
	return nil
}

// benchFleet is what a run sends to and reads from.
type benchFleet struct {
	db  *gorm.DB
	pub *queue.Publisher
	// skus are the SKUs the holds take from.
	skus []string
}

// startFleet makes the run's queues, schema and inventory and starts the workers; the
// cleanup undoes what was made, whatever failed.
func startFleet(ctx context.Context, cfg e2ebench.Config, o Options, run string) (*benchFleet, func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	bins, err := fleet.BinDir(o.BinDir)
	if err != nil {
		return nil, cleanup, err
	}
	logDir, err := os.MkdirTemp("", "junban-bench-expiry-")
	if err != nil {
		return nil, cleanup, err
	}
	c, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return nil, cleanup, err
	}
	orders, err := queue.EnsurePair(ctx, c, run+"-orders", run+"-orders-dlq", 5, 30)
	if err != nil {
		return nil, cleanup, err
	}
	results, err := queue.EnsurePair(ctx, c, run+"-results", run+"-results-dlq", 5, 30)
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() {
		for _, u := range []string{orders.URL, orders.DLQURL, results.URL, results.DLQURL} {
			_, _ = c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}) // best effort: a run's own queues
		}
	})
	admin, err := cfg.Postgres.Open()
	if err != nil {
		return nil, cleanup, err
	}
	if err := admin.Exec("CREATE SCHEMA " + run).Error; err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { admin.Exec("DROP SCHEMA " + run + " CASCADE") })
	pgURL := e2ebench.WithSearchPath(cfg.Postgres.URL, run)
	db, err := config.Postgres{URL: pgURL}.Open()
	if err != nil {
		return nil, cleanup, err
	}
	sqlDB, _ := db.DB()
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return nil, cleanup, err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() {
		iter := rc.Scan(context.WithoutCancel(ctx), 0, run+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rc.Del(context.WithoutCancel(ctx), iter.Val())
		}
	})
	env := []string{
		"JUNBAN_KEY_PREFIX=" + run, "DATABASE_URL=" + pgURL,
		"JUNBAN_ORDERS_QUEUE=" + orders.URL, "JUNBAN_ORDERS_DLQ=" + orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + results.URL, "JUNBAN_RESULTS_DLQ=" + results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
	}
	names := make([]string, 0, o.Workers+1)
	for i := range o.Workers {
		names = append(names, fmt.Sprintf("order-worker-%d", i))
	}
	for _, name := range append(names, "persist-worker") {
		bin := "order-worker"
		if name == "persist-worker" {
			bin = name
		}
		p, err := fleet.Start(ctx, bins, bin, name, logDir, env)
		if err != nil {
			return nil, cleanup, err
		}
		undo = append(undo, func() { _ = p.Stop(10 * time.Second) }) // its log is in logDir
	}
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: orders.URL})
	if err != nil {
		return nil, cleanup, err
	}
	undo = append(undo, func() { _ = pub.Stop(context.Background()) }) // every send was answered already
	// The holds' own inventory: plenty of stock, so that no placement is short.
	spec := loadgen.DefaultSpec(run + "h")
	spec.Orders, spec.SKUs, spec.StockPerLot, spec.WarehouseShare = 0, 50, 1_000_000, 0
	inv := loadgen.Generate(spec).Inventory
	if err := loadgen.Import(ctx, db, inv); err != nil {
		return nil, cleanup, err
	}
	f := &benchFleet{db: db, pub: pub}
	for _, s := range inv {
		f.skus = append(f.skus, s.SKU)
	}
	return f, cleanup, nil
}

// placeHolds sends n reserve-mode placements whose holds end at end, ten a batch, and
// returns their lcids.
func placeHolds(ctx context.Context, f *benchFleet, run string, n int, end time.Time) ([]string, error) {
	lcids := make([]string, 0, n)
	var bodies [][]byte
	for i := range n {
		lcid := fmt.Sprintf("%s-H-%05d", run, i)
		lcids = append(lcids, lcid)
		data, _ := json.Marshal(event.OrderData{Mode: stock.ModeReserve, TargetDate: time.Now().AddDate(0, 0, 7).Format(time.DateOnly),
			Lines: []event.Line{{LineID: "1", SKU: f.skus[i%len(f.skus)], Qty: 1}}, Hold: event.Hold{HoldUntil: &end}})
		b, _ := json.Marshal(event.Order{EventID: lcid + "-placed", Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(), Data: data})
		bodies = append(bodies, b)
		if len(bodies) == 10 || i == n-1 {
			if err := f.pub.PublishBatch(ctx, bodies); err != nil {
				return nil, err
			}
			bodies = nil
		}
	}
	return lcids, nil
}

// awaitCount polls q (a count over lcids) until it reaches len(lcids) or until is past.
func awaitCount(ctx context.Context, db *gorm.DB, q string, lcids []string, until time.Time) error {
	for {
		var n int
		for i := 0; i < len(lcids); i += 10000 {
			var part int
			if err := db.WithContext(ctx).Raw(q, lcids[i:min(i+10000, len(lcids))]).Scan(&part).Error; err != nil {
				return err
			}
			n += part
		}
		if n == len(lcids) {
			return nil
		}
		if time.Now().After(until) {
			return fmt.Errorf("%d of %d by %s", n, len(lcids), until.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// delays reads the commit of each hold's applied expiry and returns how many there are
// and the delays from end.
func delays(ctx context.Context, db *gorm.DB, lcids []string, end time.Time) (int, sendlatency.Stats, error) {
	var lat []time.Duration
	for i := 0; i < len(lcids); i += 10000 {
		var rows []struct{ CommittedAt time.Time }
		if err := db.WithContext(ctx).Raw(`SELECT committed_at FROM inbox WHERE entity IN ? AND type = ? AND outcome = 'applied'`,
			lcids[i:min(i+10000, len(lcids))], string(event.OrderReservationExpired)).Scan(&rows).Error; err != nil {
			return 0, sendlatency.Stats{}, err
		}
		for _, r := range rows {
			lat = append(lat, r.CommittedAt.Sub(end))
		}
	}
	return len(lat), sendlatency.StatsOf(lat), nil
}

func (r Report) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "holds ending at one instant\t%d (%d expired), %d order-workers, background %.0f events/s\n", r.Holds, r.Expired, r.Workers, r.Rate)
	fmt.Fprintf(w, "hold_until -> release committed\tp50 %.0f ms, p99 %.0f ms, max %.0f ms\n", r.Delay.P50MS, r.Delay.P99MS, r.Delay.MaxMS)
	fmt.Fprintf(w, "background send -> commit (in turn)\tp50 %.0f ms, p99 %.0f ms, max %.0f ms (%d events)\n",
		r.Background.P50MS, r.Background.P99MS, r.Background.MaxMS, r.Background.Events)
	fmt.Fprintf(w, "placing the holds took\t%.1f s\n", r.PlaceS)
}
