// Package persistbench measures results applied per second through the SQS emulator
// into PostgreSQL, batched against one result per transaction (junbanlab bench persist;
// docs/performance.md).
package persistbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv/resultgen"
	"github.com/junban/junban/migrations"
)

// Options are the knobs of Run; the persist-worker's settings they mirror are named.
type Options struct {
	// Duration is how long each mode runs.
	Duration time.Duration
	// JSON prints the Result as JSON only, and no progress.
	JSON bool
	// BatchMax is the most results per batch (JUNBAN_PERSIST_BATCH_MAX).
	BatchMax int
	// Window is how long a batch collects after its first message (JUNBAN_PERSIST_BATCH_WINDOW).
	Window time.Duration
	// Receivers is the receives in flight (JUNBAN_PERSIST_RECEIVERS).
	Receivers int
	// Concurrency is the batches handed to the handler at once per receiver (JUNBAN_PERSIST_CONCURRENCY).
	Concurrency int
	// Appliers is the PostgreSQL transactions at once (JUNBAN_PERSIST_APPLIERS).
	Appliers int
	// Backlog is the results kept waiting in the queue.
	Backlog int
	// PGLatency is a round-trip time added between the bench and PostgreSQL (0: none).
	PGLatency time.Duration
	// Parts is how long each part measurement runs (0: skip them).
	Parts time.Duration
}

// Config is what the benchmark reads from the environment.
type Config struct {
	config.Postgres
	config.SQS
}

// Run measures results applied per second through the SQS emulator into
// PostgreSQL, batched (one transaction per batch) against one result per transaction:
// same run, same data, same consumer, same PostgreSQL connections, each mode in a schema
// and a queue of its own. To show where the limit is, it then measures PostgreSQL alone
// (the same stream applied without SQS, batched and single) and the queue path alone
// (the same consumer with a handler that writes nothing).
func Run(ctx context.Context, cfg Config, o Options, w io.Writer) error {
	duration, asJSON, batchMax, window, receivers, concurrency, appliers, backlog, latency, parts :=
		o.Duration, o.JSON, o.BatchMax, o.Window, o.Receivers, o.Concurrency, o.Appliers, o.Backlog, o.PGLatency, o.Parts
	// Both modes run the persist path in this process: with the persist-worker's GC target.
	gc := config.TuneGC()
	if !asJSON {
		fmt.Fprintf(os.Stderr, "bench persist: GC target %d (the persist-worker's; GOGC overrides)\n", gc)
	}
	// labelled runs fn with the profiler label mode (goroutines it starts inherit it).
	labelled := func(mode string, fn func()) {
		pprof.Do(ctx, pprof.Labels("mode", mode), func(context.Context) { fn() })
	}
	if latency > 0 {
		addr, stop, err := latencyProxy(cfg.Postgres.URL, latency)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Postgres.URL = addr
	}
	say := func(format string, a ...any) {
		if !asJSON {
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
	// Every mode replays the same stream: same seed, same catalog, same results in order.
	gen := resultgen.Config{Seed: 1, SKUs: 200, LotsPerSKU: 3, Active: 500, Prefix: name + "-"}
	loadStart := loadAverage()

	// schema gives a mode a migrated schema of its own holding the catalog, with
	// --appliers connections: both modes get the same PostgreSQL.
	var drops []func(context.Context)
	schema := func(mode string) (*gorm.DB, error) {
		db, drop, err := benchSchema(ctx, cfg.Postgres, name+"_"+mode, appliers)
		if err != nil {
			return nil, err
		}
		drops = append(drops, drop)
		if _, err := persist.WriteSKUs(ctx, db, resultgen.Catalog(gen)); err != nil {
			return nil, err
		}
		return db, nil
	}
	defer func() {
		for _, drop := range drops {
			drop(cleanup)
		}
	}()

	// throughQueue runs one mode through the SQS emulator: a producer keeps --backlog
	// results waiting, a batch consumer with --receivers receives in flight hands
	// batches to handler (as the persist-worker's).
	// committed, when not nil, counts the results committed (inbox rows): what is
	// measured then, rather than the messages the handler answered Done (which include
	// duplicate deliveries).
	throughQueue := func(mode string, d time.Duration, handler func(*atomic.Int64) queue.BatchHandler, committed func() (int64, error)) (float64, int64, error) {
		qname := name + "-" + mode
		pair, err := queue.EnsurePair(ctx, sqsClient, qname, qname+"-dlq", 5, 30)
		if err != nil {
			return 0, 0, err
		}
		defer func() {
			sqsClient.DeleteQueue(cleanup, &sqs.DeleteQueueInput{QueueUrl: aws.String(pair.URL)})
			sqsClient.DeleteQueue(cleanup, &sqs.DeleteQueueInput{QueueUrl: aws.String(pair.DLQURL)})
		}()
		var applied atomic.Int64
		h := handler(&applied)
		consumer, err := queue.NewBatchConsumer(queue.ConsumerConfig{
			Client:   sqsClient,
			QueueURL: pair.URL, DLQURL: pair.DLQURL,
			Receivers: receivers, Concurrency: receivers * concurrency,
			WaitTimeSeconds: 1, BatchMax: batchMax, BatchWindow: window,
			ShutdownBudget: 10 * time.Second,
			BatchHandler:   h,
		})
		if err != nil {
			return 0, 0, err
		}

		say("bench persist: %s: filling %s with %d results, then applying for %s", mode, qname, backlog, d)
		prodCtx, stopProducer := context.WithCancel(ctx)
		defer stopProducer()
		p := &benchProducer{c: sqsClient, url: pair.URL, gen: resultgen.New(gen), applied: &applied, backlog: int64(backlog)}
		prodErr := make(chan error, 1)
		go func() { prodErr <- p.run(prodCtx) }()
		for p.sent.Load() < int64(backlog) && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}

		say("bench persist: %s: measuring", mode)
		runCtx, stop := context.WithTimeout(ctx, d)
		defer stop()
		start := time.Now()
		ran := make(chan error, 1)
		go func() { ran <- consumer.Run(runCtx) }()
		<-runCtx.Done()
		// Count what committed within the measured time; what the shutdown finishes is not.
		done := applied.Load()
		var countErr error
		if committed != nil {
			done, countErr = committed()
		}
		took := time.Since(start)
		say("bench persist: %s: measured %d results in %s", mode, done, took.Round(time.Millisecond))
		stop()
		stopProducer()
		runErr := <-ran
		if err := <-prodErr; err != nil && !errors.Is(err, context.Canceled) {
			return 0, 0, err
		}
		if err := errors.Join(runErr, countErr); err != nil {
			return 0, 0, err
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		return float64(done) / took.Seconds(), done, nil
	}

	type row struct {
		name string
		eps  float64
		done int64
	}
	var rows []row
	for _, m := range []string{"single", "batched"} {
		db, err := schema(m)
		if err != nil {
			return err
		}
		var eps float64
		var done int64
		labelled(m, func() {
			eps, done, err = throughQueue(m, duration, func(applied *atomic.Int64) queue.BatchHandler {
				return benchHandler(m == "batched", db, appliers, applied)
			}, func() (int64, error) {
				var n int64
				err := db.WithContext(ctx).Raw("SELECT count(*) FROM inbox").Scan(&n).Error
				return n, err
			})
		})
		if err != nil {
			return err
		}
		rows = append(rows, row{m, eps, done})
	}
	out := Result{SingleEPS: round1(rows[0].eps), BatchedEPS: round1(rows[1].eps)}

	if parts > 0 {
		// PostgreSQL alone: the same stream, no SQS, the same connections.
		var apply Pair
		for _, m := range []string{"single", "batched"} {
			db, err := schema("apply_" + m)
			if err != nil {
				return err
			}
			n := 1
			if m == "batched" {
				n = batchMax
			}
			say("bench persist: PostgreSQL alone, %s: applying for %s", m, parts)
			var eps float64
			var done int64
			labelled("pg-only "+m, func() { eps, done, err = applyOnly(ctx, db, resultgen.New(gen), n, appliers, parts) })
			if err != nil {
				return err
			}
			rows = append(rows, row{"pg-only " + m, eps, done})
			if m == "batched" {
				apply.BatchedEPS = round1(eps)
			} else {
				apply.SingleEPS = round1(eps)
			}
		}
		out.ApplyOnly = &apply
		// The queue path alone: the same consumers, a handler that writes nothing.
		var eps float64
		var done int64
		labelled("sqs-only", func() {
			eps, done, err = throughQueue("sqs_only", parts, func(applied *atomic.Int64) queue.BatchHandler {
				return func(_ context.Context, ms []queue.Message) []queue.Outcome {
					applied.Add(int64(len(ms)))
					return make([]queue.Outcome, len(ms))
				}
			}, nil)
		})
		if err != nil {
			return err
		}
		rows = append(rows, row{"sqs-only", eps, done})
		out.SQSOnlyEPS = round1(eps)
	}
	out.Load1 = [2]float64{loadStart, loadAverage()}

	if asJSON {
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "bench persist: %d receive(s) in flight x %d batch(es) each, %d PostgreSQL transaction(s) at once, up to %d results per batch (window %s), backlog %d, each mode %s",
		receivers, concurrency, appliers, batchMax, window, backlog, duration)
	if latency > 0 {
		fmt.Fprintf(w, ", %s added PostgreSQL round trip", latency)
	}
	fmt.Fprintf(w, "; load average %.2f at start, %.2f at end\n", out.Load1[0], out.Load1[1])
	fmt.Fprintf(w, "%-16s %9s %10s\n", "mode", "results", "results/s")
	for _, r := range rows {
		fmt.Fprintf(w, "%-16s %9d %10.0f\n", r.name, r.done, r.eps)
	}
	if out.SingleEPS > 0 {
		fmt.Fprintf(w, "batched / single: %.1fx", out.BatchedEPS/out.SingleEPS)
		if a := out.ApplyOnly; a != nil && a.SingleEPS > 0 {
			fmt.Fprintf(w, "; PostgreSQL alone: %.1fx", a.BatchedEPS/a.SingleEPS)
		}
		if out.SQSOnlyEPS > 0 {
			// No apply path can take batched past the queue path alone.
			fmt.Fprintf(w, "; queue path alone / single: %.1fx (the ceiling of batched / single here)", out.SQSOnlyEPS/out.SingleEPS)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// Result is the figures of a run (bench persist --json): the two required figures first, then where
// the limit is.
type Result struct {
	BatchedEPS float64 `json:"batched_eps"`
	SingleEPS  float64 `json:"single_eps"`
	// ApplyOnly is PostgreSQL alone: the same stream applied without SQS.
	ApplyOnly *Pair `json:"apply_only,omitempty"`
	// SQSOnlyEPS is the queue path alone: the same consumers, a handler that writes nothing.
	SQSOnlyEPS float64 `json:"sqs_only_eps,omitempty"`
	// Load1 is the machine's 1-minute load average at the start and at the end.
	Load1 [2]float64 `json:"load1"`
}

// Pair is a batched and a single figure.
type Pair struct {
	BatchedEPS float64 `json:"batched_eps"`
	SingleEPS  float64 `json:"single_eps"`
}

// loadAverage is the 1-minute load average (0 where /proc/loadavg is missing).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	return f
}

// applyOnly applies the stream of gen straight to PostgreSQL for d, n results per
// transaction, conns transactions at once, and returns the results applied per second.
func applyOnly(ctx context.Context, db *gorm.DB, gen *resultgen.Gen, n, conns int, d time.Duration) (float64, int64, error) {
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var mu sync.Mutex // guards gen
	var applied atomic.Int64
	errs := make([]error, conns)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			for runCtx.Err() == nil {
				mu.Lock()
				rs := gen.Results(n)
				mu.Unlock()
				if _, err := persist.Apply(runCtx, db, rs); err != nil {
					if runCtx.Err() == nil {
						errs[i] = err
					}
					return
				}
				applied.Add(int64(len(rs)))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	if ctx.Err() != nil {
		return 0, 0, ctx.Err()
	}
	done := applied.Load()
	return float64(done) / took.Seconds(), done, nil
}

// benchHandler applies a batch of messages in one transaction (batched, through
// persist.Handler as the persist-worker does), or each message in a transaction of its
// own (single, decoded with persist.DecodeResult as persist.Handler decodes it),
// counting the messages settled (applied or duplicate: the producer keeps the backlog
// with it). Both run at most appliers transactions at once (the schema's pool has that
// many connections).
func benchHandler(batched bool, db *gorm.DB, appliers int, applied *atomic.Int64) queue.BatchHandler {
	if batched {
		h, _ := persist.NewHandler(persist.HandlerConfig{DB: db, Appliers: appliers})
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
			if err := persist.DecodeResult(msg.Body, &r); err != nil {
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
	// goose's session lock holds a connection of its own while the migrations run.
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
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
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
