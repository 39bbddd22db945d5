// Package order applies order events inside an entity's turn: it keeps each order's
// state and parked events in Redis, moves stock through internal/ledger, and commits
// the state, the event's done marker and its result together in one fenced script.
//
// The Processor is the package's service, so its constructor is New(Config) (as
// lockhandoff.New returns a Handoff): Config configures nothing else, and the small
// values beside it keep their own constructors (NewStore).
package order

import (
	"cmp"
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/redis/redisscript"
	"github.com/junban/junban/internal/redis/replication"
)

// Defaults the order-worker passes on to its results publisher, its turns and its
// PostgreSQL pool (the binary's JUNBAN_* variables take them; docs/configuration.md quotes
// them). Its consumer's are intake's; the other defaults it passes on are those of the
// packages it passes them to (lockhandoff, queue, ledger, this package's Config).
const (
	// ResultsLingerDefault is how long a batch of results waits for more before it is
	// sent: fuller SendMessageBatch calls (docs/performance.md, "Decisions kept").
	ResultsLingerDefault = 8 * time.Millisecond
	// DetachedTurnsDefault is how many turns may go on in the background after the message
	// that took them was handled (lockhandoff.Config.Detached, whose zero is off).
	DetachedTurnsDefault = 128
	// PGMaxConnsDefault bounds the order-worker's PostgreSQL connections (SKU and order
	// loads on a cold Redis).
	PGMaxConnsDefault = 8
)

// Defaults of Config.
const (
	DoneRetentionDefault = 7 * 24 * time.Hour
	ParkTimeoutDefault   = 24 * time.Hour
	MaxParkedDefault     = 100
	// MaxResultBytesDefault is the bound of a result on a results queue of SQS's classic
	// 256 KiB (ResultBound).
	MaxResultBytesDefault = queue.MaxMessageSizeDefault - ResultAttributesReserve
	// ResultAttributesReserve is the room a result's message keeps for its attributes (its
	// trace context) within the results queue's MaximumMessageSize.
	ResultAttributesReserve = 8 * 1024
	resultsListBatch        = 10
)

// ResultBound is the largest result body a results queue whose MaximumMessageSize is
// maxMessageSize takes: that size less ResultAttributesReserve (Config.MaxResultBytes).
func ResultBound(maxMessageSize int) int { return maxMessageSize - ResultAttributesReserve }

// Commands are the single commands the processor and the scanner send: a go-redis
// client's, or a pipeshare.Client's, which sends them in shared round trips.
type Commands interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
	LLen(ctx context.Context, key string) *redis.IntCmd
	LRange(ctx context.Context, key string, start, stop int64) *redis.StringSliceCmd
	ZAdd(ctx context.Context, key string, members ...redis.Z) *redis.IntCmd
}

// Config configures a Processor: its dependencies, then its bounds. Zero bounds take
// the defaults above.
type Config struct {
	// Redis holds the orders' state, done markers and results list (required).
	Redis redis.UniversalClient
	// Shared, when set, sends the processor's single commands (state reads, the commit
	// and ack scripts, the due index's) in round trips shared with other callers (a
	// pipeshare.Client on the same Redis); nil sends them on Redis. Pipelines, and with
	// them every WAIT, go on Redis either way.
	Shared Commands
	// Ledger moves the stock (required).
	Ledger domain.Ledger
	// Publisher takes results to the results queue (required).
	Publisher Publisher
	// DeadLetter sends an event that can never apply to the orders DLQ; nil: such an
	// event fails with ErrNoDeadLetter and stays where it is.
	DeadLetter DeadLetter
	// ResultsDeadLetter sends a result the results queue refused as the sender's fault
	// (characters SQS cannot carry, a message over its size) to the results DLQ with
	// ReasonResultRefused; nil: such a result fails with ErrNoDeadLetter and stays at the
	// head of its entity's results list.
	ResultsDeadLetter DeadLetter
	// Logger logs the processor's decisions; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives the processor's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Prefix starts every key (the same as lockhandoff's and ledger's).
	Prefix string
	// DoneRetention keeps each event's done marker and result; it must outlive SQS
	// redeliveries (the queue's retention, 4 days by default), DLQ redrives within a
	// working week and the sweeper's re-runs, and be at least the ledger's op retention.
	DoneRetention time.Duration
	// ParkTimeout dead-letters an event that waited longer for its precondition.
	ParkTimeout time.Duration
	// MaxParked bounds the parked events of one entity; beyond it the oldest is dead-lettered.
	MaxParked int
	// MaxEventBytes bounds an event's body.
	MaxEventBytes int
	// MaxResultBytes bounds a result's body: ResultBound of the results queue's
	// MaximumMessageSize (the order-worker reads it at start). A step whose result would
	// be larger is not committed: its event is quarantined at once with
	// ERR_RESULT_TOO_LARGE (ResultTooLargeError). Default MaxResultBytesDefault.
	MaxResultBytes int
	// Loader restores an order that Redis lost from PostgreSQL; nil: none.
	Loader Loader
	// Replication, when on, publishes an event's results only once replicas acknowledged
	// the commit that wrote them (WAIT in the commit's pipeline): when too few did in
	// time the handler fails, the event stays in proc and its re-run publishes them. Nil: off.
	Replication *replication.Waiter
	// Policy is what the steps read of the configuration (the reservation TTL).
	Policy domain.Policy
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.DeadLetter == nil {
		c.DeadLetter = func(context.Context, []byte, string, map[string]string) error { return ErrNoDeadLetter }
	}
	if c.ResultsDeadLetter == nil {
		c.ResultsDeadLetter = func(context.Context, []byte, string, map[string]string) error { return ErrNoDeadLetter }
	}
	if c.Prefix == "" {
		c.Prefix = "junban"
	}
	if c.DoneRetention <= 0 {
		c.DoneRetention = DoneRetentionDefault
	}
	if c.ParkTimeout <= 0 {
		c.ParkTimeout = ParkTimeoutDefault
	}
	if c.MaxParked <= 0 {
		c.MaxParked = MaxParkedDefault
	}
	if c.MaxEventBytes <= 0 {
		c.MaxEventBytes = domain.MaxEventBytes
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = MaxResultBytesDefault
	}
}

// Validate reports what is missing or wrong, every problem at once.
func (c Config) Validate() error {
	var p []error
	if c.Redis == nil {
		p = append(p, errors.New("order: Redis is required"))
	}
	if c.Ledger == nil {
		p = append(p, errors.New("order: Ledger is required"))
	}
	if c.Publisher == nil {
		p = append(p, errors.New("order: Publisher is required"))
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		p = append(p, fmt.Errorf("order: Prefix %q contains a hash tag brace", c.Prefix))
	}
	return errors.Join(p...)
}

// Loader supplies an entity's last persisted state when Redis has none: after a Redis
// data loss, orders come back from PostgreSQL like SKUs do (see docs/operations.md:
// drain the results queue first, so PostgreSQL is up to date). orderdb.PGLoader is the
// order-worker's.
type Loader interface {
	// LoadOrder returns the order and its result seq, or found=false.
	LoadOrder(ctx context.Context, lcid string) (o *event.OrderSnapshot, seq int64, found bool, err error)
}

// Publisher takes results to the results queue; nil error means SQS accepted them all.
type Publisher interface {
	PublishBatch(ctx context.Context, bodies [][]byte) error
}

// DeadLetter sends an event that can never apply to the orders DLQ with its reason.
type DeadLetter func(ctx context.Context, body []byte, reason string, attrs map[string]string) error

// ReasonResultRefused is the results DLQ's reason for a result the results queue refused
// as the sender's fault; SQS's code follows it.
const ReasonResultRefused = "ERR_RESULT_REFUSED"

// AttrOriginalBytes is set on a refused result that the results DLQ refused as it was too,
// and was sent quoted instead: the size of the result as it was.
const AttrOriginalBytes = "junban-original-bytes"

// ErrNoDeadLetter: an event had to be dead-lettered and the Processor has no DeadLetter.
var ErrNoDeadLetter = errors.New("order: no dead-letter queue configured")

// ErrFenced means the turn was lost before the commit: nothing was written, and the
// new holder re-runs the event.
var ErrFenced = errors.New("order: the turn is no longer ours")

var (
	//go:embed commit.lua
	commitLua    string
	commitScript = redis.NewScript(commitLua)
	//go:embed ack.lua
	ackLua    string
	ackScript = redis.NewScript(ackLua)
)

// Processor is the handler of every turn (lockhandoff.Handler): lockhandoff calls Step for
// each event, and Quarantine for one it takes out of the turn.
type Processor struct {
	rc redis.UniversalClient
	// shared sends the single commands: Config.Shared, or rc.
	shared Commands
	ledger domain.Ledger
	pub    Publisher
	dlq    DeadLetter
	// resultsDLQ takes the results the results queue refused.
	resultsDLQ DeadLetter
	cfg        Config
	now        func() time.Time
	log        *zap.Logger
	metrics    *metrics
	// crash, when set (tests), fails the step at a point: "commit" right before the commit,
	// "committed" right after it.
	crash func(point string) error
}

// New returns a Processor, or an error naming what cfg lacks.
func New(cfg Config) (*Processor, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	shared := cfg.Shared
	if shared == nil {
		shared = cfg.Redis
	}
	return &Processor{rc: cfg.Redis, shared: shared, ledger: cfg.Ledger, pub: cfg.Publisher, dlq: cfg.DeadLetter, resultsDLQ: cfg.ResultsDeadLetter, cfg: cfg,
		now: time.Now, log: cfg.Logger, metrics: m}, nil
}

func (p *Processor) key(entity, suffix string) string {
	return lockhandoff.Key(p.cfg.Prefix, entity, suffix)
}

// StateKey is where an entity's State lives.
func StateKey(prefix, entity string) string { return lockhandoff.Key(prefix, entity, "state") }

func doneKey(prefix, entity, eventID string) string {
	return lockhandoff.Key(prefix, entity, "done:"+eventID)
}

// Step applies one envelope in the entity's turn (the Handler's Step of lockhandoff). An
// error leaves the envelope where it is (lockhandoff re-runs it); every step is
// idempotent. The Result holds the trim of the results list the step published, and asks for
// the event's quarantine when its result can never be published (ResultTooLargeError).
//
// It runs in a span "step" with the event's id, type and entity and its outcome, in the
// event's own trace (startStep); the ledger's scripts, the commit and the results' send
// are its children.
func (p *Processor) Step(ctx context.Context, t lockhandoff.Turn, envelope []byte) (lockhandoff.Result, error) {
	trims, err := p.step(ctx, t, envelope)
	var tooLarge *ResultTooLargeError
	return lockhandoff.Result{Trims: trims, Quarantine: errors.As(err, &tooLarge)}, err
}

func (p *Processor) step(ctx context.Context, t lockhandoff.Turn, envelope []byte) (trims []lockhandoff.Trim, err error) {
	ev, err := domain.Decode(envelope, p.cfg.MaxEventBytes)
	if err != nil {
		// Validated before it was submitted, so only a changed validation rule gets here.
		ctx, span := startStep(ctx, t, nil)
		defer func() { tracing.End(span, err) }()
		p.log.With(tracing.LogFields(ctx)...).Error("undecodable envelope in a turn", zap.String("entity", t.Entity), zap.Error(err))
		return nil, p.dlq(ctx, envelope, domain.InvalidReason(err), nil)
	}
	if ev.Kind().Origin == domain.Nudge {
		return nil, nil
	}
	ctx, span := startStep(ctx, t, &ev)
	defer func() { tracing.End(span, err) }()
	return p.handle(ctx, span, t, ev)
}

func (p *Processor) handle(ctx context.Context, span trace.Span, t lockhandoff.Turn, ev domain.Event) ([]lockhandoff.Trim, error) {
	vals, err := p.readTurn(ctx, t.Entity, ev.EventID)
	if err != nil {
		return nil, err
	}
	if stored, ok := vals[0].(string); ok {
		return p.replay(ctx, t, ev, stored)
	}
	var (
		st       domain.State
		restored bool
	)
	if raw, ok := vals[1].(string); ok {
		if st, err = domain.DecodeState([]byte(raw)); err != nil {
			return nil, fmt.Errorf("order: state of %s: %w", t.Entity, err)
		}
	} else if p.cfg.Loader != nil && ev.AboutExistingOrder() {
		// No state in Redis for an event about an existing order: Redis may have lost it.
		o, seq, found, err := p.cfg.Loader.LoadOrder(ctx, t.Entity)
		if err != nil {
			return nil, err
		}
		if found {
			st, restored = domain.State{Seq: seq, Order: o}, true
			p.log.With(tracing.LogFields(ctx)...).Warn("order restored from postgres", zap.String("lcid", t.Entity), zap.Int64("seq", seq))
		}
	}
	now := p.now()
	if st, err = p.deadLetterUndecodable(ctx, t.Entity, st); err != nil {
		return nil, err
	}
	next, results, err := domain.Step(ctx, p.stepLedger(), p.cfg.Policy, st, ev, t.Seq, now)
	if err != nil {
		return nil, fmt.Errorf("order: %s %s: %w", ev.Type, ev.EventID, err)
	}
	// The results name the trace they were decided in, for the order's timeline.
	traceResults(ctx, span, st.Parked, ev, results)
	// Only what is still parked after the step expires: a parked event the step applied
	// may have moved stock in an earlier run of this step whose commit failed, and a re-run
	// must apply it again, whatever the clock says now.
	if next, err = p.expireParked(ctx, t.Entity, next, now); err != nil {
		return nil, err
	}
	if len(next.Parked) > p.cfg.MaxParked {
		if next, err = p.deadLetterParked(ctx, t.Entity, next, len(next.Parked)-p.cfg.MaxParked, "ERR_TOO_MANY_PARKED"); err != nil {
			return nil, err
		}
	}
	// The due index has a new hold before the commit that gives it to the order.
	if err := p.indexBefore(ctx, t.Entity, st, next, restored); err != nil {
		return nil, err
	}
	if err := p.crashAt("commit"); err != nil {
		return nil, err
	}
	cctx, cspan := tracing.Tracer().Start(ctx, "commit")
	pending, err := p.commit(cctx, t, ev, next, results)
	tracing.End(cspan, err)
	if err != nil {
		return nil, err
	}
	if err := p.crashAt("committed"); err != nil {
		return nil, err
	}
	p.unindexAfter(ctx, t.Entity, st, next)
	if len(results) == 0 {
		p.metrics.outcomes.WithLabelValues(string(ev.Type), "parked", "").Inc()
		if span.IsRecording() {
			span.SetAttributes(attribute.String("junban.outcome", "parked"))
		}
	}
	for _, r := range results {
		p.metrics.outcomes.WithLabelValues(string(r.Type), r.Outcome, r.Reason).Inc()
		if r.Type == event.OrderReservationExpired && r.Outcome == event.Applied {
			p.metrics.expired.Inc()
		}
		if span.IsRecording() && r.EventID == ev.EventID {
			span.SetAttributes(attribute.String("junban.outcome", r.Outcome), attribute.String("junban.reason", r.Reason))
		}
		if r.Reason == domain.ReasonUndoRefused {
			p.log.With(tracing.LogFields(ctx)...).Error("event rejected, but the ledger refused to undo some of its moves: correct the lots by hand",
				zap.String("event_id", r.EventID), zap.String("lcid", r.LCID), zap.String("type", string(r.Type)),
				zap.String("detail", r.Detail))
		}
	}
	return p.flush(ctx, t, pending)
}

func (p *Processor) crashAt(point string) error {
	if p.crash == nil {
		return nil
	}
	return p.crash(point)
}

// replay answers an event whose done marker is set: stored is the result it committed.
func (p *Processor) replay(ctx context.Context, t lockhandoff.Turn, ev domain.Event, stored string) ([]lockhandoff.Trim, error) {
	if !t.Rerun {
		// A duplicate delivery. Its result went into the results list in the script that wrote
		// this done marker, and a results list entry leaves only after it was published. The
		// event that committed it stays in proc until its handler published the results list,
		// and a turn starts from proc: so by the time a duplicate has the turn, that
		// result is in SQS already. Nothing is sent again (docs/architecture.md).
		// Only a quarantine moves an event on with results unpublished: they stay
		// in the results list, which a duplicate (its redrive, say) publishes.
		p.metrics.replayed.WithLabelValues(replayDuplicate).Inc()
		n, err := p.shared.LLen(ctx, p.key(t.Entity, "outbox")).Result()
		if err != nil || n == 0 {
			return nil, err
		}
		return p.flush(ctx, t, nil)
	}
	// A re-run of what an earlier holder left in proc: the same result again, then
	// whatever of the results list that holder did not publish.
	p.metrics.replayed.WithLabelValues(replayRerun).Inc()
	if err := p.replicated(ctx, t, ev); err != nil {
		return nil, err
	}
	if n, err := p.publish(ctx, t.Entity, []string{stored}); n == 0 {
		return nil, fmt.Errorf("order: republish %s: %w", ev.EventID, err)
	}
	return p.flush(ctx, t, nil)
}

// Load reads an entity's state (the zero State when it has none).
func (p *Processor) Load(ctx context.Context, entity string) (domain.State, error) {
	return LoadState(ctx, p.shared, p.cfg.Prefix, entity)
}

// LoadState reads an entity's state (the zero State when it has none).
func LoadState(ctx context.Context, rc Commands, prefix, entity string) (domain.State, error) {
	var st domain.State
	raw, err := rc.Get(ctx, StateKey(prefix, entity)).Bytes()
	if errors.Is(err, redis.Nil) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("order: load %s: %w", entity, err)
	}
	if st, err = domain.DecodeState(raw); err != nil {
		return st, fmt.Errorf("order: state of %s: %w", entity, err)
	}
	return st, nil
}

// commit runs commit.lua and returns the oldest results list entries to publish.
func (p *Processor) commit(ctx context.Context, t lockhandoff.Turn, ev domain.Event, st domain.State, results []event.Result) ([]string, error) {
	stateJSON, err := domain.Marshal(st)
	if err != nil {
		return nil, err
	}
	keys := []string{
		p.key(t.Entity, "lock"), p.key(t.Entity, "state"), p.key(t.Entity, "outbox"),
		doneKey(p.cfg.Prefix, t.Entity, ev.EventID),
	}
	args := []any{t.Token, stateJSON, p.cfg.DoneRetention.Milliseconds()}
	for _, r := range results {
		body, err := domain.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(body) > p.cfg.MaxResultBytes {
			return nil, &ResultTooLargeError{EventID: r.EventID, Bytes: len(body), Limit: p.cfg.MaxResultBytes}
		}
		keys = append(keys, doneKey(p.cfg.Prefix, t.Entity, r.EventID))
		args = append(args, body)
	}
	if err := p.ledgerReplicated(ctx, t.Entity, results); err != nil {
		return nil, err
	}
	var reply []any
	var acked error
	if p.cfg.Replication.On() {
		// WAIT counts the writes of its own connection: it goes in the script's pipeline.
		var c *redis.Cmd
		acked = p.cfg.Replication.Pipelined(ctx, p.rc, keys[0], "commit", func(pp redis.Pipeliner) { c = commitScript.EvalSha(ctx, pp, keys, args...) })
		if redisscript.NoScript(c) {
			acked = p.cfg.Replication.Pipelined(ctx, p.rc, keys[0], "commit", func(pp redis.Pipeliner) { c = commitScript.Eval(ctx, pp, keys, args...) })
		}
		reply, err = c.Slice()
	} else {
		reply, err = commitScript.Run(ctx, p.shared, keys, args...).Slice()
	}
	if err != nil {
		err = commitError(err)
		if errors.Is(err, errFenced) {
			p.metrics.fenced.Inc()
			return nil, fmt.Errorf("%w: %s", ErrFenced, t.Entity)
		}
		return nil, err
	}
	if len(reply) < 2 {
		// Done already: flush reads the results list itself, once what the earlier run
		// committed is on the replicas (this run's script wrote nothing to wait for).
		return nil, p.replicated(ctx, t, ev)
	}
	if acked != nil {
		// Committed, but not yet durable: the event stays in proc, and its re-run finds
		// it done and publishes its results once the replicas have them.
		return nil, fmt.Errorf("order: commit %s of %s: %w", ev.EventID, t.Entity, acked)
	}
	items, _ := reply[1].([]any)
	pending := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.(string); ok {
			pending = append(pending, s)
		}
	}
	return pending, nil
}

// ledgerReplicated returns nil once replicas acknowledged the ledger operations behind
// results, before the commit that records them (with Config.Replication on, on a Redis
// Cluster). A SKU's operations ran on its own primary, which the commit's WAIT does not
// cover: without this, a failover could keep an order's commit and lose the stock it
// moved. WAIT covers its connection's writes, and the replication stream is ordered, so a
// write of its own (a marker in the SKU's slot) makes it cover every earlier write of that
// primary. On one primary the commit's WAIT covers the ledger already: nothing is sent.
func (p *Processor) ledgerReplicated(ctx context.Context, entity string, results []event.Result) error {
	if !p.cfg.Replication.On() {
		return nil
	}
	cc, ok := p.rc.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	own, err := cc.MasterForKey(ctx, p.key(entity, "lock"))
	if err != nil {
		return fmt.Errorf("order: primary of %s: %w", entity, err)
	}
	seen := map[string]bool{}
	for _, r := range results {
		for _, s := range r.SKUs {
			key := ledger.Key(p.cfg.Prefix, s.SKU)
			node, err := cc.MasterForKey(ctx, key)
			if err != nil {
				return fmt.Errorf("order: primary of sku %s: %w", s.SKU, err)
			}
			addr := node.Options().Addr
			if seen[addr] || addr == own.Options().Addr {
				continue // the commit's own WAIT covers its primary
			}
			seen[addr] = true
			marker := key + ":replicated"
			err = p.cfg.Replication.Pipelined(ctx, p.rc, key, "ledger", func(pp redis.Pipeliner) {
				pp.Set(ctx, marker, 1, time.Minute)
			})
			if err != nil {
				return fmt.Errorf("order: ledger operations on sku %s: %w", s.SKU, err)
			}
		}
	}
	return nil
}

// readTurn reads the event's done marker and the entity's state, in one round trip (one
// slot: one hash tag). On a Redis Cluster with Config.Replication on, that round trip
// first has replicas acknowledge what the entity's primary holds of the turn (a marker
// write, then WAIT): the event's place in it (its take, the handoff that brought it to
// proc) and the state. A step's ledger operations run on the SKUs' primaries, which stay
// when the entity's primary fails over; a take that was never acknowledged would go with
// it, the event would come back from SQS behind the entity's later events, and its
// operations, remembered by op id, would answer that re-run as done against an order that
// had moved on. So no step moves stock before its event's place is durable. On one
// primary the ledger is lost or kept with the take: nothing more is sent.
func (p *Processor) readTurn(ctx context.Context, entity, eventID string) ([]any, error) {
	keys := []string{doneKey(p.cfg.Prefix, entity, eventID), StateKey(p.cfg.Prefix, entity)}
	if _, ok := p.rc.(*redis.ClusterClient); !ok || !p.cfg.Replication.On() {
		vals, err := p.shared.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("order: done marker and state: %w", err)
		}
		return vals, nil
	}
	var mget *redis.SliceCmd
	err := p.cfg.Replication.Pipelined(ctx, p.rc, keys[1], "turn", func(pp redis.Pipeliner) {
		pp.Set(ctx, p.key(entity, "replicated"), 1, time.Minute)
		mget = pp.MGet(ctx, keys...)
	})
	if err != nil {
		return nil, fmt.Errorf("order: the turn of %s on its primary: %w", entity, err)
	}
	vals, err := mget.Result()
	if err != nil {
		return nil, fmt.Errorf("order: done marker and state: %w", err)
	}
	return vals, nil
}

// replicated returns nil once replicas acknowledged what an earlier run of ev committed
// (with Config.Replication on). WAIT covers the writes of its own connection only, so
// it follows a write of its own: the done marker's retention, set again.
func (p *Processor) replicated(ctx context.Context, t lockhandoff.Turn, ev domain.Event) error {
	if !p.cfg.Replication.On() {
		return nil
	}
	done := doneKey(p.cfg.Prefix, t.Entity, ev.EventID)
	err := p.cfg.Replication.Pipelined(ctx, p.rc, done, "commit", func(pp redis.Pipeliner) {
		pp.PExpire(ctx, done, p.cfg.DoneRetention)
	})
	if err != nil {
		return fmt.Errorf("order: results of %s: %w", ev.EventID, err)
	}
	return nil
}

// replyFenced opens commit.lua's error reply when the turn is no longer this holder's.
const replyFenced = "FENCED"

// errFenced is commit.lua's FENCED reply as a value; the caller reports ErrFenced.
var errFenced = errors.New("order: commit.lua: " + replyFenced)

// commitError maps commit.lua's error replies to errors, matched with errors.Is: the one
// place where they become Go values. Other errors pass unchanged.
func commitError(err error) error {
	var re redis.Error
	if errors.As(err, &re) && redis.HasErrorPrefix(re, replyFenced) {
		return fmt.Errorf("%w: %w", errFenced, err)
	}
	return err
}

// flush publishes the results list, oldest first, until it is empty, before the turn moves on.
// first, when not nil, is the results list's head as the commit read it. A result the results
// queue refuses as the sender's fault goes to the results DLQ (publish) and leaves the
// results list with the others: it never holds back the results behind it. A failure a later
// try may pass stops the flush at that result, with an error: the turn re-runs.
func (p *Processor) flush(ctx context.Context, t lockhandoff.Turn, first []string) ([]lockhandoff.Trim, error) {
	list := p.key(t.Entity, "outbox")
	for {
		items := first
		first = nil
		if items == nil {
			var err error
			if items, err = p.shared.LRange(ctx, list, 0, resultsListBatch-1).Result(); err != nil {
				return nil, fmt.Errorf("order: results list: %w", err)
			}
		}
		if len(items) == 0 {
			return nil, nil
		}
		n, err := p.publish(ctx, t.Entity, items)
		if n == 0 {
			return nil, fmt.Errorf("order: publish results: %w", err)
		}
		// The last trim commits with the turn's next step (the handoff or the release),
		// which fences it with the turn's token: the results are in SQS already, and the
		// event leaves proc in the same script that trims its results. A trim that fails
		// there leaves the event in proc: its re-run finds it done and publishes these
		// results again (at least once).
		last := err == nil && len(items) < resultsListBatch
		if trim, terr := t.Trim(list, n); last && terr == nil {
			return []lockhandoff.Trim{trim}, nil
		}
		ok, aerr := ackResults(ctx, p.shared, p.key(t.Entity, "lock"), list, t.Token, items[:n])
		if aerr != nil {
			return nil, fmt.Errorf("order: results list ack: %w", aerr)
		}
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrFenced, t.Entity)
		}
		if last {
			return nil, nil
		}
	}
}

// ackOutbox drops published, the results list's oldest entries, while the turn of lock is token's;
// ok is false when it is not. It names the entries it drops (see ack.lua), so a run sent
// again after a lost reply drops nothing more.
func ackResults(ctx context.Context, rc redis.Scripter, lock, list, token string, published []string) (ok bool, err error) {
	if len(published) == 0 {
		return true, nil
	}
	n, err := ackScript.Run(ctx, rc, []string{lock, list}, token, len(published),
		sha1Hex(published[0]), sha1Hex(published[len(published)-1])).Int()
	return n == 1, err
}

// sha1Hex is redis.sha1hex of s.
func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// publish sends results to the results queue and returns how many of them, from the
// first, are done with: accepted, or refused as the sender's fault and dead-lettered
// (deadLetterResult). err says why the next one is not (nil when all are).
func (p *Processor) publish(ctx context.Context, entity string, items []string) (int, error) {
	bodies := make([][]byte, len(items))
	for i, s := range items {
		bodies[i] = []byte(s)
	}
	err := p.pub.PublishBatch(ctx, bodies)
	failed, ok := queue.EntryErrors(err)
	if !ok {
		return 0, err
	}
	for i := range bodies {
		e := failed[i]
		if e == nil {
			p.metrics.published.Inc()
			continue
		}
		if !e.Refused {
			return i, err
		}
		if derr := p.deadLetterResult(ctx, entity, bodies[i], e); derr != nil {
			return i, derr
		}
	}
	return len(bodies), nil
}

// deadLetterResult sends a result the results queue refused to the results DLQ with
// ReasonResultRefused and SQS's code. When the DLQ refuses the body as it is too (the same
// characters, or a size over the DLQ's), it goes quoted instead (refusedResultBody), with
// AttrOriginalBytes: it is never dropped. A send again after a failed trim may leave a
// second copy.
func (p *Processor) deadLetterResult(ctx context.Context, entity string, body []byte, refused *queue.EntryError) error {
	reason := sqsText(ReasonResultRefused + ": " + cmp.Or(refused.Code, "refused before sending") + ": " + refused.Err.Error())
	err := p.resultsDLQ(ctx, body, reason, nil)
	var api smithy.APIError
	if errors.As(err, &api) { // SQS answered: the DLQ refused the body as it is
		attrs := map[string]string{AttrOriginalBytes: strconv.Itoa(len(body))}
		if qerr := p.resultsDLQ(ctx, refusedResultBody(body), reason, attrs); qerr != nil {
			err = errors.Join(err, qerr)
		} else {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("order: dead-letter a refused result of %s: %w", entity, err)
	}
	p.metrics.refused.Inc()
	p.log.With(tracing.LogFields(ctx)...).Warn("result refused by the results queue; dead-lettered", zap.String("entity", entity),
		zap.Int("bytes", len(body)), zap.String("reason", reason))
	return nil
}

// refusedResultBodyMax bounds a refused result's quoted copy: SQS's classic maximum
// message size, which a results DLQ allows at least, less ResultAttributesReserve.
const refusedResultBodyMax = queue.MaxMessageSizeDefault - ResultAttributesReserve

// refusedResultBody is a result's body as the results DLQ takes it whatever it holds: Go
// quoted, ASCII only (strconv.Unquote gives the body back), cut to refusedResultBodyMax.
func refusedResultBody(body []byte) []byte {
	q := strconv.QuoteToASCII(string(body))
	if len(q) > refusedResultBodyMax {
		q = q[:refusedResultBodyMax]
	}
	return []byte(q)
}

// sqsText replaces what SQS and SNS cannot carry in a message (outside #x9 | #xA | #xD |
// #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF; invalid UTF-8 reads as U+FFFD) with U+FFFD.
func sqsText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD, r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
			return r
		}
		return '\uFFFD'
	}, s)
}

// deadLetterUndecodable dead-letters parked events that no longer decode (a rule of
// Decode tightened since they were parked, e.g. the id bounds): Step would fail on them
// at every run, and the order's later events would wait behind them for ever.
func (p *Processor) deadLetterUndecodable(ctx context.Context, entity string, st domain.State) (domain.State, error) {
	keep := make([]domain.Parked, 0, len(st.Parked))
	for _, pk := range st.Parked {
		_, err := domain.Decode(pk.Body, 0)
		if err == nil {
			keep = append(keep, pk)
			continue
		}
		reason := cmp.Or(domain.InvalidReason(err), domain.ReasonMalformedJSON)
		if err := p.dlq(ctx, pk.Body, reason, nil); err != nil {
			return st, fmt.Errorf("order: dead-letter parked event: %w", err)
		}
		p.metrics.outcomes.WithLabelValues("parked", "dead_lettered", reason).Inc()
		p.log.With(tracing.LogFields(ctx)...).Warn("parked event no longer decodes; dead-lettered", zap.String("entity", entity), zap.String("event_id", pk.EventID()), zap.String("reason", reason), zap.Error(err))
	}
	if len(keep) < len(st.Parked) {
		st.Parked = keep
	}
	return st, nil
}

// expireParked dead-letters parked events older than ParkTimeout. The DLQ has them
// before the state that drops them is committed, so none is lost in between.
func (p *Processor) expireParked(ctx context.Context, entity string, st domain.State, now time.Time) (domain.State, error) {
	n := 0
	for n < len(st.Parked) && now.Sub(st.Parked[n].ParkedAt) > p.cfg.ParkTimeout {
		n++
	}
	if n == 0 {
		return st, nil
	}
	return p.deadLetterParked(ctx, entity, st, n, domain.ReasonParkedTooLong)
}

func (p *Processor) deadLetterParked(ctx context.Context, entity string, st domain.State, n int, reason string) (domain.State, error) {
	for _, pk := range st.Parked[:n] {
		if err := p.dlq(ctx, pk.Body, reason, nil); err != nil {
			return st, fmt.Errorf("order: dead-letter parked event: %w", err)
		}
		p.metrics.outcomes.WithLabelValues("parked", "dead_lettered", reason).Inc()
		p.log.With(tracing.LogFields(ctx)...).Warn("parked event dead-lettered", zap.String("entity", entity), zap.String("event_id", pk.EventID()), zap.String("reason", reason))
	}
	st.Parked = append([]domain.Parked(nil), st.Parked[n:]...)
	return st, nil
}

// Kinds of junban_order_replayed_total.
const (
	replayDuplicate = "duplicate"
	replayRerun     = "rerun"
)

type metrics struct {
	outcomes  *prometheus.CounterVec
	replayed  *prometheus.CounterVec
	fenced    prometheus.Counter
	published prometheus.Counter
	refused   prometheus.Counter
	expired   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "order", Name: "events_total",
			Help: "Events applied, rejected (by reason) or parked, by type.",
		}, []string{"type", "outcome", "reason"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "order", Name: "replayed_total",
			Help: "Events found done already, by kind: duplicate (a redelivery; its result was published with its first run and is not sent again) or rerun (re-run after a crash or failure; its result is republished).",
		}, []string{"kind"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "order", Name: "fenced_total",
			Help: "Commits refused because the turn had moved to another holder.",
		}),
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "order", Name: "results_published_total",
			Help: "Results published from the results lists.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "order", Name: "results_refused_total",
			Help: "Results the results queue refused as the sender's fault, sent to the results DLQ with ERR_RESULT_REFUSED.",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "junban", Subsystem: "reservations", Name: "expired_total",
			Help: "Steps that expired an order's reservation (order.reservation_expired applied: its reserved units released).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.outcomes, m.replayed, m.fenced, m.published, m.refused, m.expired} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
