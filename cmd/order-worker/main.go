// Command order-worker consumes order events from SQS, applies each in its order's
// turn (internal/lockhandoff) with atomic inventory moves (internal/ledger), and
// publishes one result per event to the results queue.
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/http/health"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/expiry"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/platform/lifecycle"
	"github.com/junban/junban/internal/platform/service"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/postgres/orderdb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/redis/pipeshare"
	"github.com/junban/junban/internal/redis/replication"
)

// The shared round trips of the steps' single commands (pipeshare.Client): one in flight at
// a time, so that the commands that come while it is out wait for its reply and go
// together in the next, at most 64 in one, each round trip bounded by 5 s whatever its
// callers' contexts do. Measured in docs/performance.md ("Decisions kept"); not a
// setting.
const (
	sharedRoundTrips       = 1
	sharedRoundTripMax     = 64
	sharedRoundTripTimeout = 5 * time.Second
)

// Config is the order-worker's environment.
type Config struct {
	config.Common
	config.Startup
	config.Redis
	config.RedisReplication
	config.Postgres
	config.SQS
	// Concurrency is how many order events are handled at once. A handler mostly waits
	// (Redis round trips, the results' send and the message's delete, each with its
	// batching linger), so many are needed to keep two cores busy (docs/performance.md).
	Concurrency int `env:"JUNBAN_CONCURRENCY"`
	// Receivers is how many SQS receives the consumer keeps in flight (each up to 10
	// messages): one at a time caps a worker at ten messages per round trip.
	Receivers int `env:"JUNBAN_SQS_RECEIVERS"`
	// ReceiveFill is how long a receive waits for more free handlers when all but a few
	// are busy, so that it asks for ten messages instead of one or two: each SQS call
	// costs the endpoint and the worker about as much whatever its size. Nothing waits
	// while handlers are free. 0 turns it off.
	ReceiveFill time.Duration `env:"JUNBAN_SQS_RECEIVE_FILL"`
	// ReceiveLinger makes the receives in flight follow how full they come back: a
	// part-full receive lowers them (to one at least) and waits this long before the next,
	// full ones in a row raise them (to Receivers at most), so that a steady flow comes in a few
	// nearly full receives rather than many nearly empty ones (each a billed request).
	// 0 keeps Receivers receives in flight.
	ReceiveLinger time.Duration `env:"JUNBAN_SQS_RECEIVE_LINGER"`
	// ResultsLinger is how long a batch of results waits for more (up to ten per
	// SendMessageBatch) before it is sent. Each SQS call costs the endpoint about as much
	// whatever its size: fuller batches leave it more for the rest.
	ResultsLinger time.Duration `env:"JUNBAN_RESULTS_LINGER"`
	// DeleteLinger is how long a delete of the orders queue waits for others to share
	// its DeleteMessageBatch.
	DeleteLinger time.Duration `env:"JUNBAN_SQS_DELETE_LINGER"`
	// LockTTL is the lease of an entity's turn; it is renewed every third of it.
	LockTTL time.Duration `env:"JUNBAN_LOCK_TTL"`
	// HandlerDeadline abandons a handler that runs longer, so a hung worker cannot hold a turn.
	HandlerDeadline time.Duration `env:"JUNBAN_HANDLER_DEADLINE"`
	// MaxLines bounds an order event's lines; beyond it the event goes to the orders DLQ
	// with ERR_TOO_MANY_LINES. It bounds the size of the event's result, which must fit in
	// the results queue's messages: the worker refuses to start when the largest result it
	// allows would not (domain.CheckResultBound).
	MaxLines int `env:"JUNBAN_MAX_LINES"`
	// MaxWait bounds an entity's wait list; beyond it messages stay in SQS.
	MaxWait int `env:"JUNBAN_MAX_WAIT"`
	// MaxAttempts bounds the failed runs of one event, counted in Redis across turns and
	// workers: the run that reaches it dead-letters the event (ERR_MAX_ATTEMPTS), undoing
	// or completing what its runs did, and the order's later events go on.
	MaxAttempts int `env:"JUNBAN_MAX_ATTEMPTS"`
	// QuarantineMinAge is the least span of an event's failed runs before MaxAttempts
	// quarantines it, so that a short outage (PostgreSQL restarting) does not.
	QuarantineMinAge time.Duration `env:"JUNBAN_QUARANTINE_MIN_AGE"`
	// MaxWaitBytes bounds the bytes an entity's wait list holds (lockhandoff.Config.
	// MaxWaitBytes), so that a hot order of large events cannot fill Redis' memory first;
	// beyond it messages stay in SQS, as beyond MaxWait.
	MaxWaitBytes int `env:"JUNBAN_MAX_WAIT_BYTES"`
	// DrainMaxEvents and DrainMaxTime bound one holder's drain before it hands the backlog on.
	DrainMaxEvents int           `env:"JUNBAN_DRAIN_MAX_EVENTS"`
	DrainMaxTime   time.Duration `env:"JUNBAN_DRAIN_MAX_TIME"`
	// DetachedTurns is how many turns may go on in the background after the message that
	// took them was handled (lockhandoff.Config.Detached): the consumer's handler is then
	// free once the turn's first event was applied, a Redis round trip (the release)
	// sooner, and a hot order's drain no longer holds one of Concurrency's handlers.
	// Beyond it, turns drain inline. 0 turns it off.
	DetachedTurns int `env:"JUNBAN_DETACHED_TURNS"`
	// SweepInterval is how often the sweeper looks for orphaned backlogs.
	SweepInterval time.Duration `env:"JUNBAN_SWEEP_INTERVAL"`
	// DoneRetention keeps done markers and results for redeliveries.
	DoneRetention time.Duration `env:"JUNBAN_DONE_RETENTION"`
	// ParkTimeout dead-letters events whose precondition never came.
	ParkTimeout time.Duration `env:"JUNBAN_PARK_TIMEOUT"`
	// OpRetention keeps the ledger's applied op ids. It must not outlive DoneRetention:
	// a redelivered event whose done marker expired is applied again, and its ledger
	// operations must then be applied again too, not answered from memory while the
	// order records them a second time.
	OpRetention time.Duration `env:"JUNBAN_OP_RETENTION"`
	// Pprof serves /debug/pprof and counts SQS calls and Redis round trips (benchmarks).
	Pprof bool `env:"JUNBAN_PPROF" envDefault:"false"`
	// WaitTimeSeconds is the SQS long poll.
	WaitTimeSeconds int `env:"JUNBAN_SQS_WAIT_SECONDS"`
	// PGMaxConns bounds the worker's PostgreSQL connections (SKU and order loads, on a
	// cold Redis or after a data loss). Unbounded, a cold start could open one per
	// handler, and a few replicas would exhaust max_connections; beyond it loads wait.
	PGMaxConns int `env:"JUNBAN_PG_MAX_CONNS"`
	// ReservationTTL is the hold of a reserve-mode order.placed that names none, from its
	// occurred_at (domain.Policy); 0: such a reservation never expires.
	ReservationTTL time.Duration `env:"JUNBAN_RESERVATION_TTL"`
	// AllocationStrategies are the shop's default allocation strategies for an
	// order.placed that names none (domain.Policy.Strategies), comma-separated; none: such
	// an order allocates from every lot alike.
	AllocationStrategies []string `env:"JUNBAN_ALLOCATION_STRATEGIES" envSeparator:","`
	// LocationsTTL is how long the worker keeps the shop's locations it read from Redis
	// (ledger.LocationCache): a location changed reaches routed allocations within it.
	LocationsTTL time.Duration `env:"JUNBAN_LOCATIONS_TTL" envDefault:"5s"`
	// ReservationScanInterval is how often the worker looks for due holds (expiry.Scanner).
	ReservationScanInterval time.Duration `env:"JUNBAN_RESERVATION_SCAN_INTERVAL"`
}

// SetDefaults takes every default from the package that owns the setting.
func (c *Config) SetDefaults() {
	c.Concurrency = intake.ConcurrencyDefault
	c.Receivers = intake.ReceiversDefault
	c.ReceiveLinger = queue.ReceiveLingerDefault
	c.ReceiveFill = intake.ReceiveFillDefault
	c.ResultsLinger = order.ResultsLingerDefault
	c.DeleteLinger = queue.DeleteLingerDefault
	c.LockTTL = lockhandoff.LockTTLDefault
	c.HandlerDeadline = lockhandoff.HandlerDeadlineDefault
	c.MaxLines = domain.MaxLinesDefault
	c.MaxWait = lockhandoff.MaxWaitDefault
	c.MaxAttempts = lockhandoff.MaxAttemptsDefault
	c.QuarantineMinAge = lockhandoff.QuarantineMinAgeDefault
	c.MaxWaitBytes = lockhandoff.MaxWaitBytesDefault
	c.DrainMaxEvents = lockhandoff.DrainMaxEventsDefault
	c.DrainMaxTime = lockhandoff.DrainMaxTimeDefault
	c.DetachedTurns = order.DetachedTurnsDefault
	c.SweepInterval = lockhandoff.SweepIntervalDefault
	c.DoneRetention = order.DoneRetentionDefault
	c.ParkTimeout = order.ParkTimeoutDefault
	c.OpRetention = ledger.OpRetentionDefault
	c.WaitTimeSeconds = queue.WaitTimeSecondsDefault
	c.PGMaxConns = order.PGMaxConnsDefault
	c.ReservationScanInterval = expiry.ScanIntervalDefault
}

// Validate checks what the parser cannot.
func (c Config) Validate() error {
	p := append([]error{c.Common.Validate(), c.Redis.Validate(), c.Startup.Validate(), c.RedisReplication.Validate()}, c.locationProblems()...)
	if c.Concurrency < 1 {
		p = append(p, errors.New("JUNBAN_CONCURRENCY: must be at least 1"))
	}
	if c.ResultsLinger <= 0 || c.DeleteLinger <= 0 {
		p = append(p, errors.New("JUNBAN_RESULTS_LINGER, JUNBAN_SQS_DELETE_LINGER: must be positive"))
	}
	if c.Receivers < 1 {
		p = append(p, errors.New("JUNBAN_SQS_RECEIVERS: must be at least 1"))
	}
	if c.ReceiveFill < 0 {
		p = append(p, errors.New("JUNBAN_SQS_RECEIVE_FILL: must not be negative"))
	}
	if c.ReceiveLinger < 0 || c.ReceiveLinger > queue.ReceiveLingerMax {
		p = append(p, fmt.Errorf("JUNBAN_SQS_RECEIVE_LINGER: must be 0..%v", queue.ReceiveLingerMax))
	}
	if c.LockTTL < lockhandoff.LockTTLMin {
		p = append(p, fmt.Errorf("JUNBAN_LOCK_TTL: must be at least %v", lockhandoff.LockTTLMin))
	}
	if c.HandlerDeadline <= c.LockTTL {
		p = append(p, errors.New("JUNBAN_HANDLER_DEADLINE: must be longer than JUNBAN_LOCK_TTL"))
	}
	if c.MaxLines < 1 || c.MaxLines > domain.MaxLinesLimit {
		p = append(p, fmt.Errorf("JUNBAN_MAX_LINES: must be 1..%d", domain.MaxLinesLimit))
	}
	if c.MaxWait < 1 {
		p = append(p, errors.New("JUNBAN_MAX_WAIT: must be at least 1"))
	}
	if c.MaxAttempts < 1 {
		p = append(p, errors.New("JUNBAN_MAX_ATTEMPTS: must be at least 1"))
	}
	if c.QuarantineMinAge < 0 {
		p = append(p, errors.New("JUNBAN_QUARANTINE_MIN_AGE: must not be negative"))
	}
	if c.MaxWaitBytes < domain.MaxEventBytes {
		p = append(p, fmt.Errorf("JUNBAN_MAX_WAIT_BYTES: must be at least %d (the largest event)", domain.MaxEventBytes))
	}
	if c.DrainMaxEvents < 1 {
		p = append(p, errors.New("JUNBAN_DRAIN_MAX_EVENTS: must be at least 1"))
	}
	if c.DrainMaxTime <= 0 || c.SweepInterval <= 0 || c.ReservationScanInterval <= 0 {
		p = append(p, errors.New("JUNBAN_DRAIN_MAX_TIME, JUNBAN_SWEEP_INTERVAL, JUNBAN_RESERVATION_SCAN_INTERVAL: must be positive"))
	}
	if c.PGMaxConns < 1 {
		p = append(p, errors.New("JUNBAN_PG_MAX_CONNS: must be at least 1"))
	}
	if c.DetachedTurns < 0 || c.ReservationTTL < 0 {
		p = append(p, errors.New("JUNBAN_DETACHED_TURNS, JUNBAN_RESERVATION_TTL: must not be negative"))
	}
	if c.WaitTimeSeconds < 1 || c.WaitTimeSeconds > 20 {
		p = append(p, errors.New("JUNBAN_SQS_WAIT_SECONDS: must be 1..20"))
	}
	if c.DoneRetention <= 0 || c.OpRetention <= 0 {
		p = append(p, errors.New("JUNBAN_DONE_RETENTION, JUNBAN_OP_RETENTION: must be positive"))
	} else if c.OpRetention > c.DoneRetention {
		p = append(p, errors.New("JUNBAN_OP_RETENTION: must not be longer than JUNBAN_DONE_RETENTION (a redelivery after the done marker expired would find its ledger operations remembered and move nothing, while the order counts them again)"))
	}
	return errors.Join(p...)
}

// binary is what --help says about order-worker.
var binary = config.Binary{Name: "order-worker", Summary: "order-worker consumes order events from SQS, applies each in its order's turn with atomic\ninventory moves, and publishes one result per event to the results queue."}

func main() { service.Main(binary, service.Options{TuneRuntime: true}, run) }

// run wires the order-worker's parts and runs them: started in this order, stopped in the
// reverse one (the consumer, the turns, the admin server, the publishers).
func run(ctx context.Context, env service.Env[Config]) error {
	cfg, log := env.Config, env.Log
	rc, sharedConn, err := openRedis(cfg)
	if err != nil {
		return err
	}
	defer func() { sharedConn.Close(); rc.Close() }()
	d, err := openDeps(ctx, cfg, log, rc, sharedConn, env.Registry)
	if err != nil {
		return err
	}
	srv, err := newAdmin(cfg, log, d)
	if err != nil {
		return err
	}
	pubs, err := newPublishers(cfg, log, d)
	if err != nil {
		return err
	}
	turns, err := newTurns(cfg, log, d, pubs)
	if err != nil {
		_ = pubs.Stop(context.Background())
		return err
	}
	consumer, err := newConsumer(cfg, log, d, turns.turns)
	if err != nil {
		_ = pubs.Stop(context.Background())
		return err
	}
	r := lifecycle.Runner{Logger: log}
	// A result the publishers did not send within the budget is not lost: its event's
	// results list keeps it, and the event's next run publishes it again.
	r.Add(lifecycle.Part{Name: "publishers", Service: pubs, StopBound: cfg.ShutdownBudget, LogStopError: true})
	r.Add(lifecycle.Part{Name: "admin server", Service: srv, StopBound: 5 * time.Second, LogStopError: true})
	r.Add(lifecycle.Part{Name: "turns", Service: turns})
	// The consumer bounds its own shutdown (JUNBAN_SHUTDOWN_BUDGET) and hands back what
	// it did not handle.
	r.Add(lifecycle.Part{Name: "consumer", Service: lifecycle.NewLoop(consumer.Run)})
	err = r.Run(ctx, func() {
		log.Info("order-worker started", zap.String("orders", d.urls.orders), zap.String("results", d.urls.results))
	})
	log.Info("order-worker stopped")
	return err
}

// deps are what the order-worker reads from and writes to.
type deps struct {
	// rc sends the pipelines (the turns' takes and handoffs, which lockhandoff shares
	// itself; the commit's and the ledger's with the WAIT of their own connection) and
	// what is not the steps' to share: the health check, replication's checks.
	rc redis.UniversalClient
	// shared sends the single commands of the steps, the turns, the sweeper and the
	// scanner (state reads, ledger, commit and ack scripts, renewals) in shared round
	// trips, as pipelines of sharedConn: each component names it as its Shared.
	shared     *pipeshare.Client
	sharedConn redis.UniversalClient
	reg        *prometheus.Registry
	repl       *replication.Waiter
	db         *gorm.DB
	sqs        *sqs.Client
	urls       queueURLs
	// resultsMax is the results queue's maximum message size.
	resultsMax int
}

// openRedis opens the order-worker's Redis client and a second one, which the shared
// round trips of its single commands go out on (deps.shared), so that they keep
// connections of their own.
func openRedis(cfg Config) (rc, sharedConn redis.UniversalClient, err error) {
	if rc, err = cfg.Redis.Client(); err != nil {
		return nil, nil, err
	}
	if sharedConn, err = cfg.Redis.Client(); err != nil {
		rc.Close()
		return nil, nil, err
	}
	return rc, sharedConn, nil
}

// openDeps checks Redis' replication, opens PostgreSQL and SQS and looks the queues up.
func openDeps(ctx context.Context, cfg Config, log *zap.Logger, rc, sharedConn redis.UniversalClient, reg *prometheus.Registry) (*deps, error) {
	d := &deps{rc: rc, sharedConn: sharedConn, reg: reg,
		shared: pipeshare.NewClient(sharedConn, sharedRoundTrips, sharedRoundTripMax, sharedRoundTripTimeout)}
	var err error
	// Before anything is consumed: a WAITAOF the servers cannot serve is refused here.
	if d.repl, err = cfg.RedisReplication.Waiter(ctx, rc, d.reg); err != nil {
		return nil, err
	}
	// So is a replica count no primary can meet; fewer online is warned of while it runs.
	if _, err = cfg.RedisReplication.Monitor(ctx, rc, d.reg, log); err != nil {
		return nil, err
	}
	if d.db, err = openPostgres(cfg); err != nil {
		return nil, err
	}
	if d.sqs, err = queue.NewClient(ctx, cfg.SQS, queue.CountRequests(d.reg)); err != nil {
		return nil, err
	}
	// The queues may not answer yet (docker-compose starts the emulator beside us): their
	// lookups are retried for JUNBAN_STARTUP_TIMEOUT.
	err = cfg.Startup.Retry(ctx, log, "look up the queues", func(ctx context.Context) (err error) {
		if d.urls, err = resolve(ctx, cfg.SQS, d.sqs); err != nil {
			return err
		}
		d.resultsMax, err = checkResultBound(ctx, cfg, d.sqs, d.urls.results, log)
		return err
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// newAdmin is the server of /healthz, /readyz and /metrics (and with JUNBAN_PPROF the
// profiles and the SQS call counts) on JUNBAN_HTTP_ADDR.
func newAdmin(cfg Config, log *zap.Logger, d *deps) (*health.Server, error) {
	srv, err := health.New(health.Config{Addr: cfg.HTTPAddr, Registry: d.reg, Logger: log})
	if err != nil {
		return nil, err
	}
	if cfg.Pprof {
		srv.EnablePprof()
		if d.sqs, err = countCalls(d.sqs, d.reg, d.rc, d.sharedConn); err != nil {
			return nil, err
		}
	}
	srv.AddCheck("redis", health.RedisCheck(d.rc))
	srv.AddCheck("redis_replication", d.repl.Ready)
	srv.AddCheck("postgres", health.PostgresCheck(d.db))
	srv.AddCheck("sqs", health.SQSCheck(d.sqs, d.urls.orders))
	return srv, nil
}

// publishers send the results, and the nudges that wake a worker for a turn's backlog.
type publishers struct{ results, nudges *queue.Publisher }

func newPublishers(cfg Config, log *zap.Logger, d *deps) (*publishers, error) {
	results, err := queue.NewPublisher(queue.PublisherConfig{Client: d.sqs, QueueURL: d.urls.results, Keys: domain.ResultKeys, MaxMessageSize: d.resultsMax, Linger: cfg.ResultsLinger, Registerer: d.reg, Logger: log})
	if err != nil {
		return nil, err
	}
	nudges, err := queue.NewPublisher(queue.PublisherConfig{Client: d.sqs, QueueURL: d.urls.orders, Name: "orders-nudge", Keys: domain.OrderKeys, Registerer: d.reg, Logger: log})
	if err != nil {
		_ = results.Stop(context.Background())
		return nil, err
	}
	return &publishers{results: results, nudges: nudges}, nil
}

// Start does nothing: the publishers send from the moment they are made.
func (p *publishers) Start(context.Context) error { return nil }

// Stop flushes both publishers, at most until ctx ends.
func (p *publishers) Stop(ctx context.Context) error {
	return errors.Join(p.nudges.Stop(ctx), p.results.Stop(ctx))
}

// newProcessor is the handler of every turn: it applies an event with the ledger's moves
// and publishes its results.
func newProcessor(cfg Config, log *zap.Logger, d *deps, results *queue.Publisher) (*order.Processor, error) {
	led, err := ledger.New(ledger.Config{Redis: d.rc, Shared: d.shared, Prefix: cfg.KeyPrefix, Loader: inventorydb.PGLoader{DB: d.db}, OpRetention: cfg.OpRetention})
	if err != nil {
		return nil, err
	}
	deadLetter := func(ctx context.Context, body []byte, reason string, attrs map[string]string) error {
		return queue.DeadLetter(ctx, d.sqs, d.urls.ordersDLQ, body, reason, attrs, deadLetterKeys(d.urls.ordersDLQ, body))
	}
	resultsDeadLetter := func(ctx context.Context, body []byte, reason string, attrs map[string]string) error {
		return queue.DeadLetter(ctx, d.sqs, d.urls.resultsDLQ, body, reason, attrs, resultDeadLetterKeys(d.urls.resultsDLQ, body))
	}
	return order.New(order.Config{
		Redis: d.rc, Shared: d.shared, Ledger: led, Publisher: results, DeadLetter: deadLetter, ResultsDeadLetter: resultsDeadLetter,
		MaxResultBytes: order.ResultBound(d.resultsMax), Logger: log, Registerer: d.reg,
		Prefix: cfg.KeyPrefix, DoneRetention: cfg.DoneRetention, ParkTimeout: cfg.ParkTimeout,
		Loader: orderdb.PGLoader{DB: d.db}, Replication: d.repl, Policy: domain.Policy{
			ReservationTTL: cfg.ReservationTTL, Strategies: strategiesOf(cfg.AllocationStrategies),
			Locations: ledger.NewLocationCache(d.shared, cfg.KeyPrefix, cfg.LocationsTTL),
		},
	})
}

// locationProblems are the problems of the location settings.
func (c Config) locationProblems() []error {
	var p []error
	if r := (stock.Route{Strategies: strategiesOf(c.AllocationStrategies), ShipTo: &stock.Coordinates{}, Pinned: "p"}); r.Validate() != nil {
		p = append(p, fmt.Errorf("JUNBAN_ALLOCATION_STRATEGIES: %v", r.Validate()))
	}
	if c.LocationsTTL < 0 {
		p = append(p, errors.New("JUNBAN_LOCATIONS_TTL: must not be negative"))
	}
	return p
}

// strategiesOf are JUNBAN_ALLOCATION_STRATEGIES's strategies.
func strategiesOf(names []string) []stock.Strategy {
	var out []stock.Strategy
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, stock.Strategy(n))
		}
	}
	return out
}

// newScanner is the scanner of the due holds, which submits their expiry into the turns.
func newScanner(cfg Config, log *zap.Logger, d *deps, turns *lockhandoff.Handoff) (*expiry.Scanner, error) {
	return expiry.NewScanner(expiry.ScannerConfig{Redis: d.rc, Shared: d.shared, Turns: turns, Prefix: cfg.KeyPrefix,
		Interval: cfg.ReservationScanInterval, Logger: log, Registerer: d.reg})
}

// deadLetterKeys are the ids on a FIFO DLQ of an event the order-worker dead-letters from
// a turn (quarantined, parked too long, no longer decoding): its entity's group
// (queue.DeadLetterGroup for a body that does not decode) and a new deduplication id.
// The event's SQS message is gone by then, and the same event dead-lettered again after a
// redrive must not be dropped as the first copy's duplicate: its copy in the DLQ is the
// only one. A send repeated after an error may leave two copies; a redrive moves a body
// once.
func deadLetterKeys(dlqURL string, body []byte) queue.Keys {
	if !queue.IsFIFO(dlqURL) {
		return queue.Keys{}
	}
	group, _, err := domain.OrderKeys(body)
	if err != nil {
		group = queue.DeadLetterGroup
	}
	return queue.Keys{Group: group, Dedup: "dead-letter-" + uuid.NewString()}
}

// resultDeadLetterKeys are the ids on a FIFO results DLQ of a result the results queue
// refused: its entity's group (queue.DeadLetterGroup for a body that does not decode, such
// as its quoted copy) and a new deduplication id, as deadLetterKeys.
func resultDeadLetterKeys(dlqURL string, body []byte) queue.Keys {
	if !queue.IsFIFO(dlqURL) {
		return queue.Keys{}
	}
	group, _, err := domain.ResultKeys(body)
	if err != nil {
		group = queue.DeadLetterGroup
	}
	return queue.Keys{Group: group, Dedup: "dead-letter-" + uuid.NewString()}
}

// newTurns is the entities' turns (lockhandoff), each running the processor, with the
// scanner that submits due holds into them.
func newTurns(cfg Config, log *zap.Logger, d *deps, pubs *publishers) (*turnsService, error) {
	proc, err := newProcessor(cfg, log, d, pubs.results)
	if err != nil {
		return nil, err
	}
	rc, repl, reg, nudges := d.rc, d.repl, d.reg, pubs.nudges
	turns, err := lockhandoff.New(lockhandoff.Config{
		Redis:            rc,
		Shared:           d.shared,
		Prefix:           cfg.KeyPrefix,
		LockTTL:          cfg.LockTTL,
		HandlerDeadline:  cfg.HandlerDeadline,
		MaxWait:          cfg.MaxWait,
		MaxWaitBytes:     cfg.MaxWaitBytes,
		MaxAttempts:      cfg.MaxAttempts,
		QuarantineMinAge: quarantineMinAge(cfg.QuarantineMinAge),
		DrainMaxEvents:   cfg.DrainMaxEvents,
		DrainMaxTime:     cfg.DrainMaxTime,
		Detached:         cfg.DetachedTurns,
		SweepInterval:    cfg.SweepInterval,
		Replication:      repl,
		Nudge:            intake.Nudger(nudges),
		Logger:           log,
		Registerer:       reg,
		Handler:          proc,
	})
	if err != nil {
		return nil, err
	}
	scanner, err := newScanner(cfg, log, d, turns)
	if err != nil {
		return nil, err
	}
	return &turnsService{turns: turns, scanner: scanner, budget: cfg.ShutdownBudget}, nil
}

// turnsService runs the turns and the scanner of due holds.
type turnsService struct {
	turns   *lockhandoff.Handoff
	scanner *expiry.Scanner
	budget  time.Duration
}

// Start starts the turns, then the scanner.
func (t *turnsService) Start(ctx context.Context) error {
	if err := t.turns.Start(ctx); err != nil {
		return err
	}
	t.scanner.Start(ctx)
	// On shutdown, every turn leaves after the envelope it runs, with a nudge for its
	// backlog: those of the consumer's handlers, and the detached ones, which no handler
	// waits for. A detached turn whose handler still runs when the consumer's handlers are
	// cut short is cut short too (Stop's bound). The Stop after the consumer has returned
	// waits for them all.
	context.AfterFunc(ctx, func() {
		t.scanner.Stop() // before the turns: a scan submits into them
		bound, cancel := context.WithTimeout(context.Background(), queue.HandlerBudget(t.budget))
		defer cancel()
		_ = t.turns.Stop(bound) // past the bound, the turns cut short left their envelopes in proc
	})
	return nil
}

// Stop stops the scanner, then waits for every turn to leave.
func (t *turnsService) Stop(context.Context) error {
	t.scanner.Stop()
	_ = t.turns.Stop(context.Background()) // no bound: nil
	return nil
}

// newConsumer is the consumer of the orders queue, which hands each event to its turn.
func newConsumer(cfg Config, log *zap.Logger, d *deps, turns *lockhandoff.Handoff) (*queue.Consumer, error) {
	metrics, err := intake.NewWorkerMetrics(d.reg)
	if err != nil {
		return nil, err
	}
	// The worker unwraps each message once, and starts its process span with the trace
	// context it found there (an SNS notification's).
	worker := &intake.Worker{Turns: turns, MaxLines: cfg.MaxLines, Metrics: metrics, Log: log, Queue: queue.NameOf(d.urls.orders)}
	return queue.NewConsumer(queue.ConsumerConfig{
		Client:          d.sqs,
		Handler:         worker.Handle,
		QueueURL:        d.urls.orders,
		DLQURL:          d.urls.ordersDLQ,
		Concurrency:     cfg.Concurrency,
		Receivers:       cfg.Receivers,
		ReceiveFill:     cfg.ReceiveFill,
		ReceiveLinger:   cfg.ReceiveLinger,
		DeleteLinger:    cfg.DeleteLinger,
		WaitTimeSeconds: cfg.WaitTimeSeconds,
		ShutdownBudget:  cfg.ShutdownBudget,
		Registerer:      d.reg,
		Logger:          log,
		SpanInHandler:   true,
	})
}

// quarantineMinAge maps the environment's 0 (no minimum) to lockhandoff's negative: its
// zero is its default.
func quarantineMinAge(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// checkResultBound refuses to start when the largest result an accepted event can make
// (JUNBAN_MAX_LINES) would not fit in the results queue's messages: such a result could
// never be published, and its order would wait behind it. It returns the queue's maximum
// message size, which the results publisher then keeps to, and the processor's bound of a
// result follows (order.ResultBound).
func checkResultBound(ctx context.Context, cfg Config, c *sqs.Client, resultsURL string, log *zap.Logger) (int, error) {
	size, reported, err := queue.MaxMessageSize(ctx, c, resultsURL)
	if err != nil {
		return 0, err
	}
	if !reported {
		log.Info("the results queue does not report MaximumMessageSize; assuming SQS's default", zap.Int("bytes", size))
	}
	if err := domain.CheckResultBound(cfg.MaxLines, size); err != nil {
		return 0, backoff.Permanent(err) // a setting to change: no retry mends it
	}
	log.Info("results fit the results queue", zap.Int("max_lines", cfg.MaxLines),
		zap.Int("worst_case_bytes", domain.WorstCaseResultBytes(cfg.MaxLines, domain.ResultLotsPerLine)),
		zap.Int("max_message_bytes", size), zap.Int("max_result_bytes", order.ResultBound(size)))
	return size, nil
}

type queueURLs struct{ orders, ordersDLQ, results, resultsDLQ string }

func resolve(ctx context.Context, cfg config.SQS, c *sqs.Client) (queueURLs, error) {
	var u queueURLs
	var err error
	if u.orders, err = queue.ResolveURL(ctx, c, cfg.OrdersQueue); err != nil {
		return u, err
	}
	if u.ordersDLQ, err = queue.ResolveURL(ctx, c, cfg.OrdersDLQ); err != nil {
		return u, err
	}
	if u.results, err = queue.ResolveURL(ctx, c, cfg.ResultsQueue); err != nil {
		return u, err
	}
	u.resultsDLQ, err = queue.ResolveURL(ctx, c, cfg.ResultsDLQ)
	return u, err
}

// openPostgres connects to PostgreSQL with at most cfg.PGMaxConns connections.
func openPostgres(cfg Config) (*gorm.DB, error) { return cfg.Postgres.OpenPool(cfg.PGMaxConns) }
