package e2ebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/migrations"
	"github.com/junban/junban/tools/apibench"
)

// RunAPI runs the benchmark on a workload's SKUs while an order-worker (its own
// queues, PostgreSQL schema and key prefix, all removed afterwards) applies the
// workload's order events, sent at rate per second: the reads meet the allocations,
// releases and shipments of real orders on the same SKUs.
func RunAPI(ctx context.Context, cfg Config, rc redis.UniversalClient, opt apibench.Options, rate float64, binDir string) (apibench.Report, error) {
	bins, err := fleet.BinDir(binDir)
	if err != nil {
		return apibench.Report{}, err
	}
	run := "ba" + randomID()
	opt.Prefix = run
	logDir, err := os.MkdirTemp("", "junban-bench-api-")
	if err != nil {
		return apibench.Report{}, err
	}
	c, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return apibench.Report{}, err
	}
	orders, err := queue.EnsurePair(ctx, c, run+"-orders", run+"-orders-dlq", 5, 30)
	if err != nil {
		return apibench.Report{}, err
	}
	results, err := queue.EnsurePair(ctx, c, run+"-results", run+"-results-dlq", 5, 30)
	if err != nil {
		return apibench.Report{}, err
	}
	defer func() {
		for _, u := range []string{orders.URL, orders.DLQURL, results.URL, results.DLQURL} {
			c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}()
	admin, err := cfg.Postgres.Open()
	if err != nil {
		return apibench.Report{}, err
	}
	if err := admin.Exec("CREATE SCHEMA " + run).Error; err != nil {
		return apibench.Report{}, err
	}
	defer admin.Exec("DROP SCHEMA " + run + " CASCADE")
	pgURL := WithSearchPath(cfg.Postgres.URL, run)
	db, err := config.Postgres{URL: pgURL}.OpenPool(4)
	if err != nil {
		return apibench.Report{}, err
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		return apibench.Report{}, err
	}
	defer func() {
		bg := context.WithoutCancel(ctx)
		iter := rc.Scan(bg, 0, run+"*", 1000).Iterator()
		for iter.Next(bg) {
			rc.Del(bg, iter.Val())
		}
	}()

	// Enough orders (about 5 events each) for every round at the rate.
	total := time.Duration(opt.Rounds*4)*opt.Duration + 30*time.Second
	spec := loadgen.DefaultSpec(run)
	spec.SKUs, spec.LotsPerSKU, spec.StockPerLot = opt.SKUs, opt.Lots, 1_000_000
	spec.Orders = max(100, int(rate*total.Seconds()/5))
	w := loadgen.Generate(spec)
	if err := loadgen.Import(ctx, db, w.Inventory); err != nil {
		return apibench.Report{}, err
	}
	env := []string{
		"JUNBAN_KEY_PREFIX=" + run, "DATABASE_URL=" + pgURL,
		"JUNBAN_ORDERS_QUEUE=" + orders.URL, "JUNBAN_ORDERS_DLQ=" + orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE=" + results.URL, "JUNBAN_RESULTS_DLQ=" + results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=warn", "JUNBAN_LOG_FORMAT=json",
	}
	worker, err := fleet.Start(ctx, bins, "order-worker", "order-worker", logDir, env)
	if err != nil {
		return apibench.Report{}, err
	}
	defer worker.Stop(10 * time.Second)
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: orders.URL})
	if err != nil {
		return apibench.Report{}, err
	}
	defer pub.Stop(context.Background())

	names := make([]string, len(w.Inventory))
	for i, s := range w.Inventory {
		names[i] = s.SKU
	}
	opt.SKUNames, opt.Date = names, spec.TargetDate
	if opt.Ledger, err = ledger.New(ledger.Config{Redis: rc, Prefix: run, Loader: inventorydb.PGLoader{DB: db}}); err != nil {
		return apibench.Report{}, err
	}
	opt.Writers = func(ctx context.Context) (int64, error) {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate * 10))
		defer tick.Stop()
		var sent int64
		for i := 0; i < len(w.Events); i += 10 {
			select {
			case <-ctx.Done():
				return sent, nil
			case <-tick.C:
			}
			var bodies [][]byte
			for _, e := range w.Events[i:min(i+10, len(w.Events))] {
				b, err := json.Marshal(e)
				if err != nil {
					return sent, err
				}
				bodies = append(bodies, b)
			}
			if err := pub.PublishBatch(ctx, bodies); err != nil {
				if ctx.Err() != nil {
					return sent, nil
				}
				return sent, err
			}
			sent += int64(len(bodies))
		}
		return sent, nil
	}
	fmt.Fprintf(os.Stderr, "bench api: an order-worker (log in %s) applies %d events of %d orders at %.0f/s meanwhile\n", logDir, len(w.Events), spec.Orders, rate)
	return apibench.Run(ctx, rc, db, opt, os.Stderr)
}
