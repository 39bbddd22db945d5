// Command persist-worker consumes result events from the results queue and writes them to
// PostgreSQL in batches, one transaction per batch, idempotently and in any order
// (internal/postgres/persist). A message is deleted only after its batch committed.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/lifecycle"
	"github.com/junban/junban/internal/platform/service"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/migrations"
)

// Config is the persist-worker's environment.
type Config struct {
	config.Common
	config.Startup
	config.Postgres
	config.SQS
	// Migrate applies the database migrations at start.
	Migrate bool `env:"JUNBAN_MIGRATE" envDefault:"true"`
	// Pprof serves /debug/pprof on the admin listener (diagnosis and benchmarks).
	Pprof bool `env:"JUNBAN_PPROF" envDefault:"false"`
	// BatchMax is the most results applied in one transaction.
	BatchMax int `env:"JUNBAN_PERSIST_BATCH_MAX"`
	// BatchWindow is how long a batch keeps collecting receives after its first message.
	BatchWindow time.Duration `env:"JUNBAN_PERSIST_BATCH_WINDOW"`
	// Receivers is how many receives from the results queue stay in flight: one receive
	// loop alone is bound by the latency of ReceiveMessage (ten messages a call), so the
	// receive rate grows with the receivers, not with the PostgreSQL connections. They
	// fill one batch at a time between them, so batches stay as large as the flow allows.
	Receivers int `env:"JUNBAN_PERSIST_RECEIVERS"`
	// ReceiveLinger makes the receives in flight follow how full they come back: a
	// part-full receive lowers them (to one at least) and waits this long before the next,
	// full ones in a row raise them (to Receivers at most), so that a steady flow comes in a few
	// nearly full receives rather than many nearly empty ones (each a billed request).
	// 0 keeps Receivers receives in flight.
	ReceiveLinger time.Duration `env:"JUNBAN_SQS_RECEIVE_LINGER"`
	// Concurrency is how many batches, per receiver, may be handed to the appliers (or
	// wait for one) at once: Receivers x Concurrency in all.
	Concurrency int `env:"JUNBAN_PERSIST_CONCURRENCY"`
	// Appliers is how many batches are applied at once over all consumers: the
	// PostgreSQL connections in use (one more for readiness checks). A batch of up to
	// BatchMax results is one transaction, so a few connections take what many
	// receivers bring.
	Appliers int `env:"JUNBAN_PERSIST_APPLIERS"`
	// Visibility is the visibility timeout asked for on every receive; the consumer
	// extends it every third while a batch is being applied (or held). 0: the queue's own.
	Visibility time.Duration `env:"JUNBAN_PERSIST_VISIBILITY"`
	// WaitTimeSeconds is the SQS long poll.
	WaitTimeSeconds int `env:"JUNBAN_SQS_WAIT_SECONDS"`
	// RetryBase is the pause after a batch's first failed apply; it doubles per attempt, with jitter.
	RetryBase time.Duration `env:"JUNBAN_PERSIST_RETRY_BASE"`
	// RetryMax caps the pause between attempts.
	RetryMax time.Duration `env:"JUNBAN_PERSIST_RETRY_MAX"`
	// HoldMax is how long a batch that PostgreSQL cannot take is held and retried before
	// its messages go back to SQS (each hand-back spends one of maxReceiveCount).
	HoldMax time.Duration `env:"JUNBAN_PERSIST_HOLD_MAX"`
	// AttemptTimeout bounds one batch apply.
	AttemptTimeout time.Duration `env:"JUNBAN_PERSIST_ATTEMPT_TIMEOUT"`
	// Outbound are the outbound events' settings: the outbox, its relay to SNS, its retention.
	Outbound outbound.Config
	// SNSEndpoint overrides the SNS endpoint the relay publishes to (the local stack's
	// emulator); empty for AWS.
	SNSEndpoint string `env:"AWS_ENDPOINT_URL_SNS"`
}

// SetDefaults takes every default from the package that owns the setting.
func (c *Config) SetDefaults() {
	c.BatchMax = persist.BatchMaxDefault
	c.BatchWindow = persist.BatchWindowDefault
	c.Receivers = persist.ReceiversDefault
	c.ReceiveLinger = persist.ReceiveLingerDefault
	c.Concurrency = persist.ConcurrencyDefault
	c.Appliers = persist.AppliersDefault
	c.Visibility = persist.VisibilityDefault
	c.WaitTimeSeconds = queue.WaitTimeSecondsDefault
	c.RetryBase = persist.RetryBaseDefault
	c.RetryMax = persist.RetryMaxDefault
	c.HoldMax = persist.HoldMaxDefault
	c.AttemptTimeout = persist.AttemptTimeoutDefault
}

// Validate checks what the parser cannot.
func (c Config) Validate() error {
	p := []error{c.Common.Validate(), c.Startup.Validate(), c.Outbound.Validate()}
	if c.BatchMax < 1 {
		p = append(p, errors.New("JUNBAN_PERSIST_BATCH_MAX: must be at least 1"))
	}
	if c.BatchWindow < 0 {
		p = append(p, errors.New("JUNBAN_PERSIST_BATCH_WINDOW: must not be negative"))
	}
	if c.Receivers < 1 {
		p = append(p, errors.New("JUNBAN_PERSIST_RECEIVERS: must be at least 1"))
	}
	if c.ReceiveLinger < 0 || c.ReceiveLinger > queue.ReceiveLingerMax {
		p = append(p, errors.New("JUNBAN_SQS_RECEIVE_LINGER: must be 0..1s"))
	}
	if c.Concurrency < 1 {
		p = append(p, errors.New("JUNBAN_PERSIST_CONCURRENCY: must be at least 1"))
	}
	if c.Appliers < 1 {
		p = append(p, errors.New("JUNBAN_PERSIST_APPLIERS: must be at least 1"))
	}
	if c.Visibility < 0 || c.Visibility%time.Second != 0 || c.Visibility > 12*time.Hour {
		p = append(p, errors.New("JUNBAN_PERSIST_VISIBILITY: must be whole seconds within 0..12h"))
	}
	if c.Visibility > 0 && c.Visibility < 3*time.Second {
		p = append(p, errors.New("JUNBAN_PERSIST_VISIBILITY: must be at least 3s (heartbeats run every third)"))
	}
	if c.WaitTimeSeconds < 1 || c.WaitTimeSeconds > 20 {
		p = append(p, errors.New("JUNBAN_SQS_WAIT_SECONDS: must be 1..20"))
	}
	if c.RetryBase <= 0 {
		p = append(p, errors.New("JUNBAN_PERSIST_RETRY_BASE: must be positive"))
	}
	if c.RetryMax < c.RetryBase {
		p = append(p, errors.New("JUNBAN_PERSIST_RETRY_MAX: must be at least JUNBAN_PERSIST_RETRY_BASE"))
	}
	if c.HoldMax <= 0 {
		p = append(p, errors.New("JUNBAN_PERSIST_HOLD_MAX: must be positive"))
	}
	if c.AttemptTimeout <= 0 {
		p = append(p, errors.New("JUNBAN_PERSIST_ATTEMPT_TIMEOUT: must be positive"))
	}
	return errors.Join(p...)
}

// binary is what --help says about persist-worker.
var binary = config.Binary{Name: "persist-worker", Summary: "persist-worker consumes result events from the results queue and writes them to PostgreSQL\nin batches, one transaction per batch, idempotently and in any order."}

func main() { service.Main(binary, service.Options{TuneRuntime: true}, run) }

// run wires the persist-worker's parts and runs them: started in this order, stopped in
// the reverse one (the consumer, the outbox's relay and cleanup, the admin server).
func run(ctx context.Context, env service.Env[Config]) error {
	cfg, log, reg := env.Config, env.Log, env.Registry
	sqsClient, results, dlq, err := openQueues(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	db, err := openPostgres(ctx, cfg, log)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}

	relay, err := newRelay(ctx, cfg, log, reg, db)
	if err != nil {
		return err
	}
	h, err := newHandler(ctx, cfg, log, reg, db, relay)
	if err != nil {
		return err
	}
	srv, err := newAdmin(cfg, log, reg, map[string]health.Check{
		"postgres": health.PostgresCheck(db), "sqs": health.SQSCheck(sqsClient, results), "apply": h.Ready,
	})
	if err != nil {
		return err
	}
	consumer, err := newConsumer(cfg, log, reg, sqsClient, results, dlq, h)
	if err != nil {
		return err
	}
	r := lifecycle.Runner{Logger: log}
	// The admin server's shutdown gets a second: the consumer took the budget.
	r.Add(lifecycle.Part{Name: "admin server", Service: srv, StopBound: time.Second, LogStopError: true})
	if err := addOutbound(&r, cfg, log, reg, db, relay); err != nil {
		return err
	}
	r.Add(lifecycle.Part{Name: "consumer", Service: lifecycle.NewLoop(consumer.Run)})
	err = r.Run(ctx, func() {
		log.Info("persist-worker started", zap.String("results", results), zap.String("dlq", dlq),
			zap.Int("receivers", cfg.Receivers), zap.Int("concurrency", cfg.Concurrency), zap.Int("appliers", cfg.Appliers),
			zap.Int("batch_max", cfg.BatchMax))
	})
	log.Info("persist-worker stopped")
	return err
}

// newHandler applies the batches to PostgreSQL. A batch held while PostgreSQL is away goes
// back to SQS at once when ctx ends (shutdown).
func newHandler(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer, db *gorm.DB, relay *outbound.Relay) (*persist.Handler, error) {
	quit := make(chan struct{})
	context.AfterFunc(ctx, func() { close(quit) })
	hc := persist.HandlerConfig{
		DB:             db,
		Logger:         log,
		Registerer:     reg,
		RetryBase:      cfg.RetryBase,
		RetryMax:       cfg.RetryMax,
		HoldMax:        cfg.HoldMax,
		AttemptTimeout: cfg.AttemptTimeout,
		Quit:           quit,
		Appliers:       cfg.Appliers,
	}
	// The handler writes outbound events into the outbox in each batch's transaction, and
	// kicks this replica's relay (when one runs) after each commit that wrote some.
	if cfg.Outbound.On() {
		hc.Outbound = &outbound.Writer{LowStockThreshold: cfg.Outbound.LowStockThreshold}
		if relay != nil {
			hc.OutboxWritten = relay.Kick
		}
	}
	return persist.NewHandler(hc)
}

// newRelay is the outbox's relay to SNS when a topic is set, nil otherwise.
func newRelay(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer, db *gorm.DB) (*outbound.Relay, error) {
	if cfg.Outbound.TopicARN == "" {
		return nil, nil
	}
	sn, err := topics.NewClient(ctx, topics.Config{Region: cfg.Region, Endpoint: cfg.SNSEndpoint}, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	return outbound.NewRelay(outbound.RelayConfig{
		DB:         db,
		SNS:        sn,
		TopicARN:   cfg.Outbound.TopicARN,
		Poll:       cfg.Outbound.Poll,
		Publishers: cfg.Outbound.Publishers,
		RoundMax:   cfg.Outbound.RoundMax,
		Logger:     log.Named("outbox"),
		Registerer: reg,
	})
}

// addOutbound adds the relay (when there is one) and, with outbound events on, the
// outbox's retention cleanup: published rows only when a relay runs, every row otherwise.
// Both end when the runner's context ends; one that fails logs why, and the worker goes on.
func addOutbound(r *lifecycle.Runner, cfg Config, log *zap.Logger, reg prometheus.Registerer, db *gorm.DB, relay *outbound.Relay) error {
	if !cfg.Outbound.On() {
		return nil
	}
	cleaner, err := outbound.NewCleaner(outbound.CleanerConfig{
		DB:            db,
		Retention:     cfg.Outbound.Retention,
		PublishedOnly: relay != nil,
		Logger:        log.Named("outbox"),
		Registerer:    reg,
	})
	if err != nil {
		return err
	}
	r.Add(lifecycle.Part{Name: "outbox cleanup", Service: lifecycle.NewLoop(logged(log, "outbox cleanup stopped", cleaner.Run))})
	if relay != nil {
		r.Add(lifecycle.Part{Name: "outbox relay", Service: lifecycle.NewLoop(logged(log, "outbox relay stopped", relay.Run))})
	}
	log.Info("outbox on", zap.Bool("relay", relay != nil), zap.String("topic", cfg.Outbound.TopicARN),
		zap.Bool("fifo", cfg.Outbound.FIFO()), zap.Duration("retention", cfg.Outbound.Retention),
		zap.Int64("low_stock_threshold", cfg.Outbound.LowStockThreshold))
	return nil
}

// logged is run, whose error is logged as msg; it returns when ctx ends, so that a
// background loop that failed does not end the worker.
func logged(log *zap.Logger, msg string, run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := run(ctx); err != nil {
			log.Error(msg, zap.Error(err))
		}
		<-ctx.Done()
		return nil
	}
}

// openQueues opens SQS and finds the results queue and its DLQ, retrying while SQS does
// not answer.
func openQueues(ctx context.Context, cfg Config, log *zap.Logger, reg prometheus.Registerer) (c *sqs.Client, results, dlq string, err error) {
	if c, err = queue.NewClient(ctx, cfg.SQS, queue.CountRequests(reg)); err != nil {
		return nil, "", "", err
	}
	err = cfg.Startup.Retry(ctx, log, "resolve the results queues", func(ctx context.Context) error {
		if results, err = queue.ResolveURL(ctx, c, cfg.ResultsQueue); err != nil {
			return err
		}
		dlq, err = queue.ResolveURL(ctx, c, cfg.ResultsDLQ)
		return err
	})
	return c, results, dlq, err
}

// openPostgres connects to PostgreSQL and, with JUNBAN_MIGRATE, applies the migrations,
// each step retried while PostgreSQL does not answer.
func openPostgres(ctx context.Context, cfg Config, log *zap.Logger) (*gorm.DB, error) {
	var db *gorm.DB
	err := cfg.Startup.Retry(ctx, log, "connect to PostgreSQL", func(context.Context) error {
		var err error
		// One connection per applier (batches applied at once), one for readiness checks,
		// and with outbound events the cleanup's, the relay's round and its stats reads.
		conns := cfg.Appliers + 1
		if cfg.Outbound.On() {
			conns += 3
		}
		db, err = cfg.Postgres.OpenPool(conns)
		return err
	})
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if !cfg.Migrate {
		return db, nil
	}
	err = cfg.Startup.Retry(ctx, log, "apply migrations", func(ctx context.Context) error {
		n, err := migrations.Up(ctx, sqlDB)
		if err == nil && n > 0 {
			log.Info("migrations applied", zap.Int("count", n))
		}
		return err
	})
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return db, nil
}

// newAdmin is the server of /healthz, /readyz (with checks) and /metrics on
// JUNBAN_HTTP_ADDR (and /debug/pprof with JUNBAN_PPROF).
func newAdmin(cfg Config, log *zap.Logger, reg *prometheus.Registry, checks map[string]health.Check) (*health.Server, error) {
	srv, err := health.New(health.Config{Addr: cfg.HTTPAddr, Registry: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	if cfg.Pprof {
		srv.EnablePprof()
	}
	for name, c := range checks {
		srv.AddCheck(name, c)
	}
	return srv, nil
}

// newConsumer is the batch consumer of the results queue, which hands each batch to h.
func newConsumer(cfg Config, log *zap.Logger, reg prometheus.Registerer, sqsClient *sqs.Client, results, dlq string, h *persist.Handler) (*queue.Consumer, error) {
	// The HTTP server's shutdown gets what the consumer leaves of the budget, at least a second.
	consumerBudget := max(cfg.ShutdownBudget-time.Second, cfg.ShutdownBudget*4/5)
	return queue.NewBatchConsumer(queue.ConsumerConfig{
		Client:            sqsClient,
		BatchHandler:      h.HandleBatch,
		QueueURL:          results,
		DLQURL:            dlq,
		Receivers:         cfg.Receivers,
		ReceiveLinger:     cfg.ReceiveLinger,
		Concurrency:       cfg.Receivers * cfg.Concurrency,
		WaitTimeSeconds:   cfg.WaitTimeSeconds,
		VisibilityTimeout: cfg.Visibility,
		BatchMax:          cfg.BatchMax,
		BatchWindow:       cfg.BatchWindow,
		ShutdownBudget:    consumerBudget,
		Registerer:        reg,
		Logger:            log,
	})
}
