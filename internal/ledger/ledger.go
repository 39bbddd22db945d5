// Package ledger keeps inventory in Redis: per SKU a small set of lots with buckets,
// changed only by atomic Lua scripts that move quantities between buckets. The
// operations, results and errors it runs are internal/ledger/stock's.
package ledger

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/redis/keyscan"
)

var (
	// candidates.lua holds the candidate rules of an allocation; the allocation and the
	// availability script both run with it prepended, so the two cannot disagree.
	//go:embed candidates.lua
	candidatesLua string
	//go:embed ledger.lua
	ledgerLua    string
	ledgerScript = redis.NewScript(scriptHeader() + candidatesLua + ledgerLua)
	//go:embed available.lua
	availableLua string
	// The no-writes flag must open the script: Redis refuses every write call of it, and
	// lets it run on a replica.
	availableScript = redis.NewScript("#!lua flags=no-writes\n" + scriptHeader() + candidatesLua + availableLua)

	//go:embed load.lua
	loadLua    string
	loadScript = redis.NewScript(loadLua)
)

// OpRetentionDefault is how long an applied op id is remembered: well beyond SQS's
// maximum message retention (14 days is the maximum; junban's queues keep 4 days by
// default) would cost memory, so it is 7 days, which covers redeliveries, DLQ redrives
// within a working week and the sweeper re-running a crashed worker's backlog.
const OpRetentionDefault = 7 * 24 * time.Hour

// Config configures a Ledger.
type Config struct {
	// Redis holds the ledger (required).
	Redis redis.UniversalClient
	// Shared, when set, sends the ledger's single commands (its scripts and reads) in
	// round trips shared with other callers (a pipeshare.Client on the same Redis); nil
	// sends them on Redis. Pipelines and scans go on Redis either way.
	Shared Commands
	// Prefix starts every key (config.Redis.KeyPrefix; required, no '{' or '}').
	Prefix string
	// Loader supplies SKUs that are not in Redis yet; nil: such a SKU is ErrNotLoaded.
	Loader stock.Loader
	// OpRetention is how long an op id and its result are remembered (rounded up to a
	// second); a replay after that is applied anew. Zero means OpRetentionDefault.
	OpRetention time.Duration
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.OpRetention == 0 {
		c.OpRetention = OpRetentionDefault
	}
}

// Validate reports the problems of a Config, joined with errors.Join.
func (c Config) Validate() error {
	var p []error
	if c.Redis == nil {
		p = append(p, errors.New("ledger: Redis is required"))
	}
	if c.Prefix == "" {
		p = append(p, errors.New("ledger: Prefix is required"))
	} else if strings.ContainsAny(c.Prefix, "{}") {
		p = append(p, fmt.Errorf("ledger: Prefix %q contains a hash tag brace", c.Prefix))
	}
	if c.OpRetention < 0 {
		p = append(p, errors.New("ledger: OpRetention must not be negative"))
	}
	return errors.Join(p...)
}

func (c Config) retentionSeconds() string {
	return strconv.FormatInt(int64((c.OpRetention+time.Second-1)/time.Second), 10)
}

// Commands are the single commands the ledger sends: a go-redis client's, or a
// pipeshare.Client's, which sends them in shared round trips.
type Commands interface {
	redis.Scripter
	HGet(ctx context.Context, key, field string) *redis.StringCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// Ledger runs inventory operations on Redis. It is safe for concurrent use: every
// operation is one atomic script on one SKU, with no lock and no retry loop.
type Ledger struct {
	rc redis.UniversalClient
	// shared sends the single commands: Config.Shared, or rc.
	shared Commands
	prefix string
	loader stock.Loader
	ttl    string
}

// New returns a Ledger over cfg.Redis, or an error naming what cfg lacks.
func New(cfg Config) (*Ledger, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	shared := cfg.Shared
	if shared == nil {
		shared = cfg.Redis
	}
	return &Ledger{rc: cfg.Redis, shared: shared, prefix: cfg.Prefix, loader: cfg.Loader, ttl: cfg.retentionSeconds()}, nil
}

// Inventory is what both Ledger and Model do, so callers and tests can use either.
type Inventory interface {
	Load(ctx context.Context, sku string) error
	Apply(ctx context.Context, op stock.Op) (stock.Result, error)
	Snapshot(ctx context.Context, sku string) (stock.SKU, error)
}

var (
	_ Inventory = (*Ledger)(nil)
	_ Inventory = (*stock.Model)(nil)
)

// Load creates the SKU's state in Redis from the Loader unless it exists already.
func (l *Ledger) Load(ctx context.Context, sku string) error {
	_, err := l.load(ctx, sku)
	return err
}

func (l *Ledger) load(ctx context.Context, sku string) (created bool, err error) {
	if err := stock.CheckSKU(sku); err != nil {
		return false, err
	}
	if l.loader == nil {
		return false, fmt.Errorf("ledger: load sku=%s: no loader: %w", sku, stock.ErrNotLoaded)
	}
	s, err := l.loader.LoadSKU(ctx, sku)
	if err != nil {
		return false, fmt.Errorf("ledger: load sku=%s: %w", sku, err)
	}
	s.SKU = sku
	if err := stock.CheckSKUState(s); err != nil {
		return false, fmt.Errorf("ledger: load: %w", err)
	}
	n, err := loadScript.Run(ctx, l.shared, []string{Key(l.prefix, sku)}, loadArgs(s)...).Int()
	if err != nil {
		return false, fmt.Errorf("ledger: load sku=%s: %w", sku, err)
	}
	return n == 1, nil
}

// run calls ledger.lua, loading the SKU once if it is not in Redis and re-indexing it once
// if the script asks to (ERR_REINDEX). fp is the request's fingerprint followed by its
// fence (stock.Fenced; none: the fingerprint alone): a record under opID answers only a
// request with its fingerprint (ErrOpConflict otherwise), made at its fence when both
// have one (ErrOpFenced otherwise). legacy is the
// op id an older version named the operation by ("" for none): its record is replayed when
// opID has none (docs/ledger.md, "Operation ids").
//
// Each call is a span "ledger <name>" (the script's op) with the SKU and the op id; a
// refusal (ErrShortage, ...) is its outcome, not an error status.
//
// name may carry a location after a tab (at): the script reads it, the span and the
// errors name the operation alone.
func (l *Ledger) run(ctx context.Context, name, fp, opID, legacy, sku string, args ...any) (stock.Result, error) {
	op, _, _ := strings.Cut(name, "\t")
	ctx, span := tracing.Tracer().Start(ctx, "ledger "+op, trace.WithAttributes(
		attribute.String("junban.sku", sku), attribute.String("junban.op_id", opID)))
	r, err := l.runScript(ctx, name, op, fp, opID, legacy, sku, args...)
	r.LegacyOpID = legacy
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("junban.replayed", r.Replayed))
		if reason, ok := stock.Rejection(err); ok {
			span.SetAttributes(attribute.String("junban.reason", reason))
			span.End()
			return r, err
		}
	}
	tracing.End(span, err)
	return r, err
}

func (l *Ledger) runScript(ctx context.Context, arg, name, fp, opID, legacy, sku string, args ...any) (stock.Result, error) {
	keys := []string{Key(l.prefix, sku), opKey(l.prefix, sku, opID)}
	if legacy != "" {
		keys = append(keys, opKey(l.prefix, sku, legacy))
	}
	argv := append([]any{arg, l.ttl, fp}, args...)
	loaded, reindexed := false, false
	for {
		res, err := ledgerScript.Run(ctx, l.shared, keys, argv...).Slice()
		if err != nil {
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				return stock.Result{OpID: opID, SKU: sku}, fmt.Errorf("ledger: %s sku=%s: %w", name, sku, err)
			}
			if next, ok := regSeqReply(err); ok {
				return stock.Result{OpID: opID, SKU: sku}, next
			}
			if isReindexReply(err) && !reindexed {
				reindexed = true
				if _, err := l.Reindex(ctx, sku, false); err != nil {
					return stock.Result{OpID: opID, SKU: sku}, fmt.Errorf("ledger: %s sku=%s: %w", name, sku, err)
				}
				continue
			}
			e, replayed, ok := scriptError(name, sku, err)
			if !ok {
				return stock.Result{OpID: opID, SKU: sku}, fmt.Errorf("ledger: %s sku=%s: %w", name, sku, err)
			}
			if errors.Is(e, stock.ErrNotLoaded) && !loaded {
				loaded = true
				if _, err := l.load(ctx, sku); err != nil {
					if name != "regsku" && errors.Is(err, stock.ErrUnknownSKU) {
						kept, rerr := l.rememberUnknownSKU(ctx, keys[1], fp)
						if rerr != nil {
							return stock.Result{OpID: opID, SKU: sku}, fmt.Errorf("ledger: %s sku=%s: remember the unknown SKU: %w", name, sku, rerr)
						}
						if !kept {
							continue // another run's record came first: the script answers from it
						}
					}
					return stock.Result{OpID: opID, SKU: sku}, err
				}
				continue
			}
			return stock.Result{OpID: opID, SKU: sku, Replayed: replayed}, e
		}
		if len(res) != 2 {
			return stock.Result{OpID: opID, SKU: sku}, fmt.Errorf("ledger: %s sku=%s: unexpected reply %v", name, sku, res)
		}
		text, _ := res[1].(string)
		r, err := decodeResult(opID, sku, text)
		r.Replayed = res[0] == int64(1)
		return r, err
	}
}

// rememberScript stores an operation's record unless it has one (KEYS[1] the record,
// ARGV[1] the record as ledger.lua writes it, ARGV[2] its retention in seconds); 1 when
// it stored it.
var rememberScript = redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) and 1 or 0`)

// rememberUnknownSKU records ERR_UNKNOWN_SKU under an operation's op id (key) for the
// request fp (its fingerprint and fence), as ledger.lua records a refusal, unless the op id
// has a record: kept says whether it stored it. The Loader's answer is remembered like
// the script's own refusals, so that a re-run of the step that met it meets it again
// even once the SKU is registered: the step undid its earlier operations on the refusal,
// and a re-run that applied instead would replay their records and never reach the
// undos again. A new operation (another op id) on the registered SKU runs anew.
func (l *Ledger) rememberUnknownSKU(ctx context.Context, key, fp string) (kept bool, err error) {
	const outcome = "EERR_UNKNOWN_SKU unknown to the ledger and its loader"
	// "#", the fingerprint and the outcome; with a fence, "%", the fingerprint, the fence's
	// digits, "|" and the outcome.
	rec := "#" + fp + outcome
	if len(fp) > stock.FingerprintBytes {
		rec = "%" + fp + "|" + outcome
	}
	n, err := rememberScript.Run(ctx, l.shared, []string{key}, rec, l.ttl).Int()
	return n == 1, err
}

// moveLots runs ledger.lua's move: the quantities in lots from one bucket to another,
// then those in back the other way (op ids as run takes them), with the holder whose holdings change (or "") and the
// reason the result carries (or "").
func (l *Ledger) moveLots(ctx context.Context, fp, opID, legacy, sku, from, to, holder, reason string, lots, back []stock.LotQty) (stock.Result, error) {
	args := make([]any, 0, 5+2*(len(lots)+len(back)))
	args = append(args, from, to, holder, reason, len(lots))
	for _, q := range lots {
		args = append(args, q.LotID, q.Qty)
	}
	for _, q := range back {
		args = append(args, q.LotID, q.Qty)
	}
	return l.run(ctx, "move", fp, opID, legacy, sku, args...)
}

// moveLotsAt moves qty units of one lot, which must be stored at location (empty: any),
// from one bucket to another: a hold, its release, a damage.
func (l *Ledger) moveLotsAt(ctx context.Context, fp, opID, sku, from, to, reason, lot string, qty int64, location string) (stock.Result, error) {
	// "smove": a SKU's move, which fills the queue (ledger.lua); an order's is "move".
	return l.run(ctx, at("smove", location), fp, opID, "", sku, from, to, "", reason, 1, lot, qty)
}

func bucketCode(b string) string { return bucketCodes[b] }

// A lot's key needs its registration number. RegisterLot passes the keys of a window of
// numbers from the SKU's next, so that registrations on one SKU at the same time find
// theirs: regSeqWindow numbers, twice as many on each run that found the number past
// them (up to regSeqWindowMax); regSeqAttempts bounds the runs.
const (
	regSeqWindow    = 8
	regSeqWindowMax = 512
	regSeqAttempts  = 10
)

// withRegSeq runs op, which computes a lot's key from the registration numbers reg to
// reg+window-1, again from the number the script answers as long as the lot's was not
// among them (ERR_REG_SEQ: op's first guess was stale, or other registrations came
// first).
func withRegSeq(name, sku string, reg int64, op func(reg int64, window int) (stock.Result, error)) (stock.Result, error) {
	var res stock.Result
	window := regSeqWindow
	for range regSeqAttempts {
		var err error
		res, err = op(reg, window)
		var moved regSeqMoved
		if !errors.As(err, &moved) {
			return res, err
		}
		reg, window = int64(moved), min(2*window, regSeqWindowMax)
	}
	return res, fmt.Errorf("ledger: %s sku=%s: the registration number moved %d times", name, sku, regSeqAttempts)
}

// nextRegSeq reads the registration number the SKU's next lot gets (0 when the hash has
// none: the script then finds it). A guess: the script checks it.
func (l *Ledger) nextRegSeq(ctx context.Context, sku string) (int64, error) {
	n, err := l.shared.HGet(ctx, Key(l.prefix, sku), fieldNextReg).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// regSeqOf reads a lot's registration number (-1 when Redis has no such lot yet). A guess
// too: the script checks it.
func (l *Ledger) regSeqOf(ctx context.Context, sku, lot string) (int64, error) {
	m, err := l.shared.HGet(ctx, Key(l.prefix, sku), "m:"+lot).Result()
	if errors.Is(err, redis.Nil) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	lt := stock.Lot{LotID: lot}
	if err := decodeMeta(&lt, m); err != nil {
		return 0, err
	}
	return lt.RegSeq, nil
}

// Snapshot returns the SKU's current state, lots by registration order; ErrNotLoaded
// when it is not in Redis.
func (l *Ledger) Snapshot(ctx context.Context, sku string) (stock.SKU, error) {
	if err := stock.CheckSKU(sku); err != nil {
		return stock.SKU{}, err
	}
	h, err := l.shared.HGetAll(ctx, Key(l.prefix, sku)).Result()
	if err != nil {
		return stock.SKU{}, fmt.Errorf("ledger: snapshot sku=%s: %w", sku, err)
	}
	if len(h) == 0 {
		return stock.SKU{}, stock.OpError("snapshot", sku, stock.ErrNotLoaded, "")
	}
	return decodeHash(sku, h)
}

// ScanSKUs calls fn with every SKU loaded under the ledger's prefix, on every master
// of a cluster. fn may be called concurrently for different masters of a cluster.
func (l *Ledger) ScanSKUs(ctx context.Context, fn func(sku string) error) error {
	head := Key(l.prefix, "")
	head = head[:len(head)-1] // "<prefix>:inv:{"
	pattern := keyscan.Escape(head) + "*}"
	return keyscan.Each(ctx, l.rc, pattern, "hash", func(k string) error {
		return fn(strings.TrimSuffix(strings.TrimPrefix(k, head), "}"))
	})
}

// Queue returns sku's waiting lines in serving order (docs/ledger.md, "Waiting
// demand"): the sorted set <key>:q and each entry's fields in <key>:qe.
func (l *Ledger) Queue(ctx context.Context, sku string) ([]stock.QueueEntry, error) {
	if err := stock.CheckSKU(sku); err != nil {
		return nil, err
	}
	k := Key(l.prefix, sku)
	members, err := l.rc.ZRange(ctx, k+":q", 0, -1).Result()
	if err != nil || len(members) == 0 {
		return nil, err
	}
	vals, err := l.rc.HMGet(ctx, k+":qe", members...).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: queue sku=%s: %w", sku, err)
	}
	out := make([]stock.QueueEntry, len(members))
	for i, m := range members {
		v, _ := vals[i].(string)
		if out[i], err = decodeQueueEntry(m, v); err != nil {
			return nil, fmt.Errorf("ledger: queue sku=%s: %w", sku, err)
		}
	}
	return out, nil
}
