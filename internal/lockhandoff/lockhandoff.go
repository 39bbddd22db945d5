// Package lockhandoff gives every entity (an order's lcid) a turn: events about one entity
// are handled one at a time, in the order they reached the entity, by whichever worker
// holds the turn, while different entities run fully in parallel.
//
// A worker that finds the turn free takes it and handles the event; one that finds it held
// appends the event to the entity's wait list in Redis and is done with it (custody moved
// to Redis). The holder, after each event, hands the turn to the next waiting event in one
// script, under the same lock, without a release and re-acquire; it releases only when the
// list is empty. A sweeper recovers the backlog of a holder that died. The protocol, its
// invariants and a sequence diagram are in docs/lockhandoff.md.
//
// Every key of one entity shares one hash tag (see Key), so each script touches one Redis
// Cluster slot; the backlog index, sharded over several keys, is the only structure
// outside it.
package lockhandoff

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/redis/replication"
)

// Key builds every key of an entity: prefix + ":{" + entity + "}:" + suffix, so all keys of
// one entity share one hash tag and one Redis Cluster slot. The suffixes this package uses
// are lock, wait, proc and seq; other packages add their own (order, done:<event_id>) and
// fence their writes with the lock key.
func Key(prefix, entity, suffix string) string {
	return prefix + ":{" + entity + "}:" + suffix
}

// indexKey is the key of one shard of the backlog index. Its hash tag can never be an
// entity's keys: the suffix differs from every entity suffix.
func indexKey(prefix string, shard int) string {
	return Key(prefix, "lockhandoff-index-"+strconv.Itoa(shard), "backlog")
}

// Defaults of Config: the order-worker's JUNBAN_* defaults too.
const (
	LockTTLDefault          = 10 * time.Second
	HandlerDeadlineDefault  = 60 * time.Second
	MaxWaitDefault          = 10_000
	MaxWaitBytesDefault     = 16 << 20
	DrainMaxEventsDefault   = 1_000
	DrainMaxTimeDefault     = 20 * time.Second
	SweepIntervalDefault    = 5 * time.Second
	SweepConcurrencyDefault = 4
	IndexShardsDefault      = 16
	HandlerRetriesDefault   = 2
	RetryBackoffDefault     = 100 * time.Millisecond

	// LockTTLMin is the shortest LockTTL New takes: the holder renews every LockTTL/3, and
	// a GC pause or a slow round trip longer than that must not cost it the turn.
	LockTTLMin = 300 * time.Millisecond
)

// The shared pipelines of the package's own scripts (take, handoff, leave; see batcher):
// at most sharedPipelines round trips in flight at once; calls beyond them wait and then
// share one pipeline, of at most sharedPipelineMax calls, which saves Redis and this
// process a system call pair per call under load. Handlers' own commands are not affected.
// Measured in docs/performance.md ("bench lock", "Decisions kept"); not a setting.
const (
	sharedPipelines   = 2
	sharedPipelineMax = 64
)

// Commands are the single commands a Handoff sends: a go-redis client's, or a
// pipeshare.Client's, which sends them in shared round trips.
type Commands interface {
	redis.Scripter
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	ZScan(ctx context.Context, key string, cursor uint64, match string, count int64) *redis.ScanCmd
}

// Config configures a Handoff. Zero fields take the defaults above; Redis and Handler are
// required.
type Config struct {
	// Redis runs every script of the turns, the sweeper and the backlog index.
	Redis redis.UniversalClient
	// Shared, when set, sends the turns' and the sweeper's single commands (renewals,
	// resumes, failure counts, the backlog index's scan) in round trips shared with other
	// callers (a pipeshare.Client on the same Redis); nil sends them on Redis. The takes,
	// handoffs and leaves share pipelines of Redis of their own (see batcher), with WAIT
	// where they need it.
	Shared Commands
	// Handler runs each envelope, and quarantines one the turn takes out (see Handler).
	Handler Handler
	// Prefix starts every key, e.g. "junban" (tests pass testenv's prefix).
	Prefix string
	// LockTTL is the lease of a turn; the holder renews it every LockTTL/3 while a handler
	// runs, so a dead holder's turn frees within LockTTL.
	LockTTL time.Duration
	// HandlerDeadline bounds one handler call: past it the handler's context is cancelled,
	// renewal stops and the turn is left (or expires) for the sweeper. Keep it well above a
	// normal event's time.
	HandlerDeadline time.Duration
	// MaxWait bounds an entity's wait list; a Submit beyond it gets ErrQueueFull.
	MaxWait int
	// MaxWaitBytes bounds the bytes of an entity's wait list (its entries: the envelopes
	// and their timestamps), so that a hot entity of large envelopes cannot fill Redis'
	// memory before MaxWait is reached; a Submit beyond it gets ErrQueueFull. A wait list
	// that is empty always takes one envelope, whatever its size.
	MaxWaitBytes int
	// DrainMaxEvents is how many events one turn handles before it leaves (release + Nudge).
	DrainMaxEvents int
	// DrainMaxTime is how long one turn drains before it leaves (release + Nudge).
	DrainMaxTime time.Duration
	// SweepInterval is the pause between two passes of the sweeper.
	SweepInterval time.Duration
	// SweepConcurrency bounds the backlogs one sweep recovers at the same time.
	SweepConcurrency int
	// IndexShards is the number of keys the backlog index is spread over (by a hash of the
	// entity), so that it is not one hot key in a cluster. Every replica must use the same.
	IndexShards int
	// IndexGrace is the age an index entry must have before the sweeper may remove it (when
	// its entity is idle). It must exceed the clock skew between replicas; default LockTTL.
	IndexGrace time.Duration
	// HandlerRetries is how many times a failing handler is re-run, inside the turn, before
	// the turn is left with the envelope still in proc for the sweeper; negative: none.
	HandlerRetries int
	// RetryBackoff is the pause before the first retry; it doubles for each next one.
	RetryBackoff time.Duration
	// MaxAttempts bounds the failed handler calls of one envelope, counted in the entity's
	// slot across retries, turns and workers: the run that reaches it hands the envelope to
	// Handler.Quarantine, and the turn moves on. It does not apply with NeverQuarantine.
	MaxAttempts int
	// QuarantineMinAge is the least time between an envelope's first and last counted
	// failure before MaxAttempts quarantines it, so that a short outage of a dependency
	// does not; negative: none.
	QuarantineMinAge time.Duration
	// NeverQuarantine keeps every envelope in its turn: Handler.Quarantine is never called,
	// and a failing envelope is re-run for ever.
	NeverQuarantine bool
	// Detached is how many turns may go on in the background after the Submit or Resume
	// that took them returned. Such a call returns as soon as the turn's first envelope
	// was handled, instead of after the whole drain: the step after it (the handoff or the
	// release, with the trims the handler returned) and the envelopes handed off after
	// it run on a goroutine of the turn's own, which Stop waits for. Until it returns, the
	// turn follows the caller's context as an inline one does; after, only Stop (or a lost
	// lease) ends it early; Stop's context bounds how long Stop waits for them. When Detached
	// turns run already, the call drains inline. 0 (the default): every turn drains inline.
	Detached int
	// Replication, when on, makes Submit's take count as done only once replicas
	// acknowledged it (WAIT in the take's pipeline; see replication.Waiter): when too few
	// did in time, Submit fails (the caller keeps its message) and a turn it took is left
	// with the envelope in proc. Nil: off.
	Replication *replication.Waiter
	// Nudge is called after a turn was left with a backlog (drain budget reached, Stop,
	// caller's context cancelled) so that another replica resumes it soon, e.g. by sending a
	// drain message whose consumer calls Resume. Nil: the sweeper resumes it.
	Nudge func(ctx context.Context, entity string) error
	// Logger logs decisions (lost leases, abandoned handlers, recoveries); nil logs nothing.
	Logger *zap.Logger
	// Registerer registers the metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
	// Now is the clock of the backlog index and the drain budget; nil is time.Now.
	Now func() time.Time
	// Hooks are test signals; all nil in production.
	Hooks Hooks
}

// Hooks let tests wait for background work instead of sleeping.
type Hooks struct {
	// AfterRenew is called after each lease renewal attempt: ok is false when the lease
	// was found lost.
	AfterRenew func(entity string, ok bool, err error)
	// BeforeForget is called by a sweep after it found an entity idle and before it
	// removes its index entry.
	BeforeForget func(entity string)
	// BeforeStep is called by a turn after an envelope's handler succeeded and before the
	// script of the step that follows (the handoff or the release).
	BeforeStep func(entity string)
	// AfterTrims is called once the trims a run of envelope returned were written with
	// the step (err nil), or not: ErrTrimFailed, a lost lease, or the reason the run
	// failed. Before the next envelope's run starts.
	AfterTrims func(entity string, envelope []byte, err error)
}

func (c *Config) setDefaults() {
	if c.LockTTL == 0 {
		c.LockTTL = LockTTLDefault
	}
	if c.HandlerDeadline == 0 {
		c.HandlerDeadline = HandlerDeadlineDefault
	}
	if c.MaxWait == 0 {
		c.MaxWait = MaxWaitDefault
	}
	if c.MaxWaitBytes == 0 {
		c.MaxWaitBytes = MaxWaitBytesDefault
	}
	if c.DrainMaxEvents == 0 {
		c.DrainMaxEvents = DrainMaxEventsDefault
	}
	if c.DrainMaxTime == 0 {
		c.DrainMaxTime = DrainMaxTimeDefault
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = SweepIntervalDefault
	}
	if c.SweepConcurrency == 0 {
		c.SweepConcurrency = SweepConcurrencyDefault
	}
	if c.IndexShards == 0 {
		c.IndexShards = IndexShardsDefault
	}
	if c.IndexGrace == 0 {
		c.IndexGrace = c.LockTTL
	}
	if c.HandlerRetries == 0 {
		c.HandlerRetries = HandlerRetriesDefault
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = RetryBackoffDefault
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = MaxAttemptsDefault
	}
	switch {
	case c.QuarantineMinAge == 0:
		c.QuarantineMinAge = QuarantineMinAgeDefault
	case c.QuarantineMinAge < 0:
		c.QuarantineMinAge = 0
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every problem of c at once (joined with errors.Join), as New does: zero
// fields count as their defaults.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("Redis is nil"))
	}
	if c.Handler == nil {
		errs = append(errs, errors.New("Handler is nil"))
	}
	if c.Prefix == "" {
		errs = append(errs, errors.New("Prefix is empty"))
	}
	if c.LockTTL < LockTTLMin {
		errs = append(errs, fmt.Errorf("LockTTL %v is below %v", c.LockTTL, LockTTLMin))
	}
	// Slices, not maps: the problems come in the same order every time.
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxWait", c.MaxWait}, {"MaxWaitBytes", c.MaxWaitBytes}, {"DrainMaxEvents", c.DrainMaxEvents},
		{"SweepConcurrency", c.SweepConcurrency}, {"IndexShards", c.IndexShards}, {"MaxAttempts", c.MaxAttempts}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d is below 1", f.name, f.v))
		}
	}
	if c.Detached < 0 {
		errs = append(errs, fmt.Errorf("Detached %d is negative", c.Detached))
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"HandlerDeadline", c.HandlerDeadline}, {"DrainMaxTime", c.DrainMaxTime}, {"SweepInterval", c.SweepInterval},
		{"IndexGrace", c.IndexGrace}, {"RetryBackoff", c.RetryBackoff}} {
		if f.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v is not positive", f.name, f.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lockhandoff: config: %w", err)
	}
	return nil
}

// ErrQueueFull is Submit's answer when the entity's wait list is at Config.MaxWait or
// Config.MaxWaitBytes: nothing was written, the caller keeps its message and lets SQS
// redeliver it later.
var ErrQueueFull = errors.New("lockhandoff: wait list full")

// ErrInvalidEntity is Submit's and Resume's answer for an entity that cannot name keys:
// empty, or holding a brace, which would break the hash tag that keeps an entity's keys
// in one slot (in a cluster its scripts would fail, while its index entry was written).
// Nothing was written; the envelope can never be submitted.
var ErrInvalidEntity = errors.New("lockhandoff: invalid entity")

// CheckEntity reports whether entity can name an entity's keys (ErrInvalidEntity).
func CheckEntity(entity string) error {
	if entity == "" || strings.ContainsAny(entity, "{}") {
		return fmt.Errorf("%w: %q (empty, or a brace)", ErrInvalidEntity, entity)
	}
	return nil
}

// Outcome says where a submitted envelope went.
type Outcome int

const (
	// OutcomeNone: Submit failed; the envelope may or may not be in Redis (keep the message).
	OutcomeNone Outcome = iota
	// OutcomeTurn: the caller took the turn and has run the drain loop (this envelope and
	// the ones handed off to it) before Submit returned; with Config.Detached, its first
	// envelope, the rest of the turn going on in the background.
	OutcomeTurn
	// OutcomeQueued: the envelope is in the entity's wait list; custody moved to Redis.
	OutcomeQueued
	// OutcomeFull: the wait list was at its bound; returned with ErrQueueFull.
	OutcomeFull
)

func (o Outcome) String() string {
	switch o {
	case OutcomeTurn:
		return "turn"
	case OutcomeQueued:
		return "queued"
	case OutcomeFull:
		return "full"
	}
	return "none"
}

// Turn is the handler's view of the turn it runs in.
type Turn struct {
	// Entity is the entity the envelope belongs to.
	Entity string
	// Seq is the fencing sequence: it grows each time an envelope enters proc, so a later
	// holder (or a re-run of the same envelope) always has a higher Seq.
	Seq int64
	// Token is the lease token: a script of another package fences its writes with
	// GET Key(prefix, entity, "lock") == Token.
	Token string
	// Rerun is true when the envelope was left in proc by an earlier holder that crashed,
	// failed or was abandoned; it may have been applied already (the handler is idempotent).
	Rerun bool
	// k are the turn's own keys, which Trim checks against; zero in a Turn a handler did
	// not get.
	k keys
}

// Handoff runs the turns of one kind of entity.
type Handoff struct {
	rc redis.UniversalClient
	// shared sends the single commands: Config.Shared, or rc.
	shared  Commands
	cfg     Config
	handler Handler
	log     *zap.Logger
	m       *metrics
	batch   *batcher

	drains   drainSet
	slots    atomic.Int64 // turns on a goroutine of their own (Config.Detached bounds them)
	stopping chan struct{}
	aborted  context.Context // cancelled when Stop's bound ends: detached turns' handlers end
	abort    context.CancelCauseFunc
	svc      service
}

// New checks cfg (Config.Validate) and returns a Handoff whose turns run cfg.Handler.
// Start starts its sweeper; Stop ends its turns.
func New(cfg Config) (*Handoff, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	rc, h := cfg.Redis, cfg.Handler
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	hd := &Handoff{
		rc: rc, shared: cmp.Or[Commands](cfg.Shared, rc), cfg: cfg, handler: h, log: cfg.Logger, m: m,
		batch:    newBatcher(rc, sharedPipelines, sharedPipelineMax, max(cfg.LockTTL, 5*time.Second), cfg.Replication),
		stopping: make(chan struct{}),
	}
	hd.aborted, hd.abort = context.WithCancelCause(context.Background())
	return hd, nil
}

// keys are the Redis keys of one entity, in the order the scripts expect them.
type keys struct{ lock, wait, proc, seq string }

func (h *Handoff) keys(entity string) keys {
	p := h.cfg.Prefix
	return keys{Key(p, entity, "lock"), Key(p, entity, "wait"), Key(p, entity, "proc"), Key(p, entity, "seq")}
}

func (h *Handoff) indexShard(entity string) string {
	f := fnv.New32a()
	f.Write([]byte(entity))
	return indexKey(h.cfg.Prefix, int(f.Sum32()%uint32(h.cfg.IndexShards)))
}

// tokenBase makes this process's tokens unique among all processes; the counter makes
// them unique within it. Tokens need to be unique, not secret, and a token per Submit must
// stay cheap (no system call).
var (
	tokenBase = rand.Text()[:16]
	tokenSeq  atomic.Uint64
)

func newToken() string { return tokenBase + strconv.FormatUint(tokenSeq.Add(1), 36) }

// Submit takes the entity's turn or appends envelope to its wait list, in one script,
// with the backlog index entry written in the same round trip.
//
// OutcomeQueued: custody of the envelope moved to Redis. OutcomeTurn: the caller held the
// turn and Submit has already run the drain loop: the handler for the oldest backlog
// envelope (this one when there was none), then for each envelope handed off, until the
// list was empty, the drain budget was reached, Stop was called or ctx was cancelled (then
// the turn is left and Nudge called). With Config.Detached, Submit returns once the first
// of those envelopes was handled, and the rest of the turn goes on in the background. On
// both outcomes, the envelope is durably in Redis from the first script on and the caller
// may delete its message: handler failures are the sweeper's business, not the caller's,
// and do not make Submit fail.
//
// An error means custody did not (verifiably) move: ErrQueueFull (nothing written) or a
// Redis failure; the caller keeps its message, and a redelivery may queue the envelope a
// second time (handlers are idempotent).
func (h *Handoff) Submit(ctx context.Context, entity string, envelope []byte) (Outcome, error) {
	if err := CheckEntity(entity); err != nil {
		return OutcomeNone, fmt.Errorf("lockhandoff: submit: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return OutcomeNone, fmt.Errorf("lockhandoff: submit %s: %w", entity, err)
	}
	k := h.keys(entity)
	token := newToken()
	take, err := h.takeAndIndex(ctx, entity, k, token, envelope)
	if err != nil {
		return OutcomeNone, fmt.Errorf("lockhandoff: submit %s: %w", entity, err)
	}
	switch take.status {
	case statusFull:
		h.m.full.Inc()
		return OutcomeFull, fmt.Errorf("lockhandoff: submit %s: %w", entity, statusError(statusFull, nil))
	case statusQueued:
		h.m.depth.Observe(float64(take.depth))
		return OutcomeQueued, nil
	}
	h.m.depth.Observe(float64(take.depth))
	h.m.turns.WithLabelValues("submit").Inc()
	h.runTurn(ctx, entity, k, token, take.first, true)
	return OutcomeTurn, nil
}

// Resume takes the entity's turn only if it is free and a backlog waits (in proc or wait),
// and drains it like Submit does (in the background after the first envelope, with
// Config.Detached). It is what a drain nudge's consumer calls; it does nothing when
// another worker holds the turn or nothing waits.
func (h *Handoff) Resume(ctx context.Context, entity string) error {
	_, err := h.resume(ctx, entity, "resume")
	return err
}

// resume takes a free turn with a backlog. Only a Resume's turn may detach: the sweeper
// bounds its recoveries with SweepConcurrency, by waiting for each.
func (h *Handoff) resume(ctx context.Context, entity, via string) (bool, error) {
	if err := CheckEntity(entity); err != nil {
		return false, fmt.Errorf("lockhandoff: resume: %w", err)
	}
	k := h.keys(entity)
	token := newToken()
	first, ok, err := h.runResume(ctx, k, token)
	if err != nil {
		return false, fmt.Errorf("lockhandoff: resume %s: %w", entity, err)
	}
	if !ok {
		return false, nil
	}
	h.m.turns.WithLabelValues(via).Inc()
	h.runTurn(ctx, entity, k, token, first, via == "resume")
	return true, nil
}
