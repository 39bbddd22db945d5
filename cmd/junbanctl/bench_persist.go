package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/persist"
	"github.com/junban/junban/internal/persist/resultgen"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/migrations"
)

// benchPersistConfig is what bench persist reads from the environment.
type benchPersistConfig struct {
	config.Postgres
	config.SQS
}

// runBenchPersist measures results applied per second through the SQS emulator into
// PostgreSQL, batched (one transaction per batch) against one result per transaction:
// same run, same data, same consumer, each mode in a schema and a queue of its own.
func runBenchPersist(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench persist", flag.ContinueOnError)
	duration := fs.Duration("duration", 10*time.Second, "how long each mode runs")
	asJSON := fs.Bool("json", false, `print {"batched_eps":..,"single_eps":..} only`)
	batchMax := fs.Int("batch", 100, "most results per batch (the persist-worker's JUNBAN_PERSIST_BATCH_MAX)")
	receivers := fs.Int("receivers", 4, "consumers receiving in parallel, in both modes (JUNBAN_PERSIST_RECEIVERS)")
	concurrency := fs.Int("concurrency", 1, "batches each consumer handles at once, in both modes (JUNBAN_PERSIST_CONCURRENCY)")
	backlog := fs.Int("backlog", 2000, "results kept waiting in the queue: a producer tops the queue up to this as the consumers drain it")
	latency := fs.Duration("pg-latency", 0, "added round-trip time between the bench and PostgreSQL (a loopback proxy), e.g. 500us for a database across the network; 0: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *batchMax < 1 || *concurrency < 1 || *receivers < 1 || *backlog < 10 {
		return fmt.Errorf("%w: --duration, --batch, --receivers and --concurrency must be positive, --backlog at least 10", errUsage)
	}
	cfg, err := config.Load[benchPersistConfig]()
	if err != nil {
		return err
	}
	if *latency > 0 {
		addr, stop, err := latencyProxy(cfg.Postgres.URL, *latency)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Postgres.URL = addr
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(os.Stderr, format+"\n", a...)
		}
	}

	id := make([]byte, 4)
	rand.Read(id)
	name := "bench_persist_" + hex.EncodeToString(id)
	sqsClient, err := queue.NewClient(ctx, cfg.SQS)
	if err != nil {
		return err
	}
	// Clean-up runs even after Ctrl-C.
	cleanup := context.WithoutCancel(ctx)
	// Both modes replay the same stream: same seed, same catalog, same results in order.
	gen := resultgen.Config{Seed: 1, SKUs: 200, LotsPerSKU: 3, Active: 500, Prefix: name + "-"}

	type mode struct {
		name string
		eps  float64
		done int64
		took time.Duration
	}
	modes := []*mode{{name: "single"}, {name: "batched"}}
	for _, m := range modes {
		schema := name + "_" + m.name
		db, drop, err := benchSchema(ctx, cfg.Postgres, schema, *receivers**concurrency)
		if err != nil {
			return err
		}
		defer drop(cleanup)
		if _, err := persist.WriteSKUs(ctx, db, resultgen.Catalog(gen)); err != nil {
			return err
		}
		qname := name + "-" + m.name
		pair, err := queue.EnsurePair(ctx, sqsClient, qname, qname+"-dlq", 5, 30)
		if err != nil {
			return err
		}
		defer func() {
			sqsClient.DeleteQueue(cleanup, &sqs.DeleteQueueInput{QueueUrl: aws.String(pair.URL)})
			sqsClient.DeleteQueue(cleanup, &sqs.DeleteQueueInput{QueueUrl: aws.String(pair.DLQURL)})
		}()

		var applied atomic.Int64
		handler := benchHandler(m.name == "batched", db, &applied)
		var consumers []*queue.Consumer
		for range *receivers {
			c, err := queue.NewBatchConsumer(sqsClient, queue.ConsumerConfig{
				QueueURL: pair.URL, DLQURL: pair.DLQURL, Concurrency: *concurrency,
				WaitTimeSeconds: 1, BatchMax: *batchMax, BatchWindow: 100 * time.Millisecond,
				ShutdownBudget: 10 * time.Second,
			}, handler)
			if err != nil {
				return err
			}
			consumers = append(consumers, c)
		}

		say("bench persist: %s: filling %s with %d results, then applying for %s", m.name, qname, *backlog, *duration)
		prodCtx, stopProducer := context.WithCancel(ctx)
		p := &benchProducer{c: sqsClient, url: pair.URL, gen: resultgen.New(gen), applied: &applied, backlog: int64(*backlog)}
		prodErr := make(chan error, 1)
		go func() { prodErr <- p.run(prodCtx) }()
		for p.sent.Load() < int64(*backlog) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}

		runCtx, stop := context.WithTimeout(ctx, *duration)
		start := time.Now()
		ran := make(chan error, 1)
		go func() {
			errs := make([]error, len(consumers))
			var wg sync.WaitGroup
			for i, c := range consumers {
				wg.Go(func() { errs[i] = c.Run(runCtx) })
			}
			wg.Wait()
			ran <- errors.Join(errs...)
		}()
		<-runCtx.Done()
		// Count what committed within the measured time; what the shutdown finishes is not.
		m.done, m.took = applied.Load(), time.Since(start)
		stop()
		stopProducer()
		runErr := <-ran
		if err := <-prodErr; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		if runErr != nil {
			return runErr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.eps = float64(m.done) / m.took.Seconds()
	}

	single, batched := modes[0], modes[1]
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]float64{
			"batched_eps": round1(batched.eps), "single_eps": round1(single.eps),
		})
	}
	fmt.Printf("bench persist: %d consumer(s) x %d batch(es) in parallel, up to %d results per batch, backlog %d, each mode %s",
		*receivers, *concurrency, *batchMax, *backlog, *duration)
	if *latency > 0 {
		fmt.Printf(", %s added PostgreSQL round trip", *latency)
	}
	fmt.Println()
	fmt.Printf("%-8s %9s %8s %10s\n", "mode", "results", "seconds", "results/s")
	for _, m := range modes {
		fmt.Printf("%-8s %9d %8.1f %10.0f\n", m.name, m.done, m.took.Seconds(), m.eps)
	}
	if single.eps > 0 {
		fmt.Printf("batched / single: %.1fx\n", batched.eps/single.eps)
	}
	return nil
}

// benchHandler applies a batch of messages in one transaction (batched), or each message
// in a transaction of its own (single), counting the results applied.
func benchHandler(batched bool, db *gorm.DB, applied *atomic.Int64) queue.BatchHandler {
	if batched {
		h, _ := persist.NewHandler(persist.HandlerConfig{DB: db})
		return func(ctx context.Context, ms []queue.Message) []queue.Outcome {
			outs := h.HandleBatch(ctx, ms)
			for _, o := range outs {
				if o.Verdict == queue.Done {
					applied.Add(1)
				}
			}
			return outs
		}
	}
	return func(ctx context.Context, ms []queue.Message) []queue.Outcome {
		outs := make([]queue.Outcome, len(ms))
		for i, msg := range ms {
			var r event.Result
			if err := json.Unmarshal(msg.Body, &r); err != nil {
				outs[i] = queue.Outcome{Verdict: queue.Poison, Reason: err.Error()}
				continue
			}
			rep, err := persist.Apply(ctx, db, []event.Result{r})
			if err != nil {
				outs[i] = queue.Outcome{Verdict: queue.Retry, Reason: err.Error()}
				continue
			}
			if rr := rep.Results[0]; rr.Status == persist.Poison {
				outs[i] = queue.Outcome{Verdict: queue.Poison, Reason: rr.Err.Error()}
				continue
			}
			applied.Add(1)
		}
		return outs
	}
}

// benchProducer keeps about backlog results waiting in the queue: it sends the next ten
// of the stream whenever fewer than backlog are sent and not yet applied. The emulator's
// calls slow down with the queue's depth, so both modes see the same depth.
type benchProducer struct {
	c       *sqs.Client
	url     string
	gen     *resultgen.Gen
	applied *atomic.Int64
	backlog int64
	sent    atomic.Int64
	mu      sync.Mutex // guards gen
}

func (p *benchProducer) run(ctx context.Context) error {
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = p.send(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *benchProducer) send(ctx context.Context) error {
	for ctx.Err() == nil {
		if p.sent.Load()-p.applied.Load() >= p.backlog {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		rs := p.gen.Results(10)
		p.mu.Unlock()
		entries := make([]types.SendMessageBatchRequestEntry, len(rs))
		for i, r := range rs {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))}
		}
		out, err := p.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.url), Entries: entries})
		if err != nil {
			return fmt.Errorf("bench persist: send: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("bench persist: send: %s", aws.ToString(out.Failed[0].Message))
		}
		p.sent.Add(int64(len(rs)))
	}
	return ctx.Err()
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// benchSchema creates a schema of the bench's own, migrated, and returns a handle on it
// and a function that drops it.
func benchSchema(ctx context.Context, pg config.Postgres, schema string, conns int) (*gorm.DB, func(context.Context), error) {
	admin, err := pg.Open()
	if err != nil {
		return nil, nil, err
	}
	adminSQL, _ := admin.DB()
	if err := admin.WithContext(ctx).Exec("CREATE SCHEMA " + schema).Error; err != nil {
		adminSQL.Close()
		return nil, nil, fmt.Errorf("bench persist: create schema: %w", err)
	}
	u, err := url.Parse(pg.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		adminSQL.Close()
		return nil, nil, errors.New("bench persist: DATABASE_URL must be a postgres:// URL")
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := config.Postgres{URL: u.String()}.Open()
	if err != nil {
		adminSQL.Close()
		return nil, nil, err
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(conns + 1)
	sqlDB.SetMaxIdleConns(conns + 1)
	drop := func(ctx context.Context) {
		sqlDB.Close()
		admin.WithContext(ctx).Exec("DROP SCHEMA " + schema + " CASCADE")
		adminSQL.Close()
	}
	if _, err := migrations.Up(ctx, sqlDB); err != nil {
		drop(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return db, drop, nil
}

// latencyProxy forwards connections to the PostgreSQL of dbURL through a loopback
// listener that delays every chunk by half of rtt in each direction, and returns dbURL
// pointed at it. Delays overlap (a chunk waits for its own deadline, not for the one
// before), so only latency is added, not a bandwidth cap.
func latencyProxy(dbURL string, rtt time.Duration) (string, func(), error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		return "", nil, errors.New("bench persist: --pg-latency needs DATABASE_URL as a postgres:// URL")
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go delayCopy(up, c, rtt/2)
			go delayCopy(c, up, rtt/2)
		}
	}()
	u.Host = ln.Addr().String()
	return u.String(), func() { ln.Close() }, nil
}

// delayCopy copies src to dst, each chunk delay after it was read; it closes both ends
// when either fails.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{b[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}
