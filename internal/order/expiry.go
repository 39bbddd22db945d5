package order

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/redis/replication"
)

// The due index: the orders whose reservation expires, spread over DueShards sorted sets
// (each its own hash tag, so its own Redis Cluster slot), member the lcid, score its
// hold_until in unix microseconds. The order's handler writes an entry before the commit
// of a step that gives the order a new hold, and removes it after the commit of one that
// clears it (while its score is still that hold); the Scanner claims due entries and
// submits their expiry into the order's turn (docs/architecture.md, "Reservations that
// expire").

// DueShards is the number of sorted sets the due index is spread over.
const DueShards = 16

// Defaults of ScannerConfig.
const (
	// ScanIntervalDefault is JUNBAN_RESERVATION_SCAN_INTERVAL's default.
	ScanIntervalDefault = time.Second
	// ScanLeaseDefault is how long a claimed entry is out of every scanner's sight: the
	// time a replica has to submit the expiry before another one may.
	ScanLeaseDefault = 30 * time.Second
	// ScanBatchDefault bounds the entries one shard gives a scan at a time.
	ScanBatchDefault = 100
	// scanParallel is how many claimed entries a scan handles at once: a submission into a
	// free turn runs the expiry's step before it returns.
	scanParallel = 16
)

var (
	//go:embed due.lua
	dueLua    string
	dueScript = redis.NewScript(dueLua)
	//go:embed undue.lua
	undueLua    string
	undueScript = redis.NewScript(undueLua)
)

// DueKey is the key of one shard of the due index. Its hash tag is no order's: an lcid
// that were "junban-due:<n>" would share the slot, never a key (no entity's key ends in
// ":due").
func DueKey(prefix string, shard int) string {
	return lockhandoff.Key(prefix, "junban-due:"+strconv.Itoa(shard), "due")
}

// DueShard is the shard of lcid's entry: FNV-1a of the lcid, modulo DueShards.
func DueShard(lcid string) int {
	f := fnv.New32a()
	_, _ = f.Write([]byte(lcid)) // never fails
	return int(f.Sum32() % DueShards)
}

// dueScore is a hold's score: unix microseconds (the hold's own precision).
func dueScore(t time.Time) int64 { return t.UnixMicro() }

// IndexHold writes lcid's entry at hold: the handler's write before a commit, and a
// re-index of restored orders (junbanctl holds reindex). A stale entry is harmless.
func IndexHold(ctx context.Context, rc redis.UniversalClient, prefix, lcid string, hold time.Time) error {
	return indexHold(ctx, rc, rc, nil, prefix, lcid, hold)
}

// indexHold is IndexHold followed, when w is on, by a WAIT on the due shard's primary
// (another primary than the order's on a cluster, so the commit's WAIT does not cover
// it): a commit that relies on the entry must not outlive it in a failover. Without the
// WAIT, the entry goes alone through shared.
func indexHold(ctx context.Context, rc redis.UniversalClient, shared Commands, w *replication.Waiter, prefix, lcid string, hold time.Time) error {
	key := DueKey(prefix, DueShard(lcid))
	z := redis.Z{Score: float64(dueScore(hold)), Member: lcid}
	var err error
	if w.On() {
		var c *redis.IntCmd
		err = w.Pipelined(ctx, rc, key, "due", func(pp redis.Pipeliner) { c = pp.ZAdd(ctx, key, z) })
		if c != nil && c.Err() != nil {
			err = c.Err()
		}
	} else {
		err = shared.ZAdd(ctx, key, z).Err()
	}
	if err != nil {
		return fmt.Errorf("order: index the hold of %s: %w", lcid, err)
	}
	return nil
}

// moveDue sets lcid's entry to next (nil: removes it) if its score is still was; it says
// whether it did.
func moveDue(ctx context.Context, rc Commands, prefix, lcid string, was int64, next *int64) (bool, error) {
	to := ""
	if next != nil {
		to = strconv.FormatInt(*next, 10)
	}
	n, err := undueScript.Run(ctx, rc, []string{DueKey(prefix, DueShard(lcid))}, lcid, was, to).Int()
	if err != nil {
		return false, fmt.Errorf("order: due entry of %s: %w", lcid, err)
	}
	return n == 1, nil
}

// holdOf is an order's hold (nil: none).
func holdOf(o *event.OrderSnapshot) *time.Time {
	if o == nil {
		return nil
	}
	return o.HoldUntil
}

func sameHold(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// indexBefore writes the due entry of a step that leaves the order a new hold, before its
// commit (restored: the state came from PostgreSQL, whose hold may lack its entry).
func (p *Processor) indexBefore(ctx context.Context, lcid string, was, next domain.State, restored bool) error {
	h := holdOf(next.Order)
	if h == nil || (sameHold(holdOf(was.Order), h) && !restored) {
		return nil
	}
	return indexHold(ctx, p.rc, p.shared, p.cfg.Replication, p.cfg.Prefix, lcid, *h)
}

// unindexAfter removes the due entry of a hold the committed step cleared, while its score
// is still that hold; a scanner's claim, or a failure here, leaves it to the scanner,
// which drops an entry whose order holds no hold.
func (p *Processor) unindexAfter(ctx context.Context, lcid string, was, next domain.State) {
	h := holdOf(was.Order)
	if h == nil || holdOf(next.Order) != nil {
		return
	}
	if _, err := moveDue(ctx, p.shared, p.cfg.Prefix, lcid, dueScore(*h), nil); err != nil {
		p.log.With(tracing.LogFields(ctx)...).Warn("due entry left to the scanner", zap.String("lcid", lcid), zap.Error(err))
	}
}

// Turns is what the scanner needs of lockhandoff: the expiries' submission.
type Turns interface {
	Submit(ctx context.Context, entity string, envelope []byte) (lockhandoff.Outcome, error)
}

// ScannerConfig configures a Scanner.
type ScannerConfig struct {
	// Redis holds the due index and the orders' state (required).
	Redis redis.UniversalClient
	// Shared, when set, sends the scanner's commands (the claim script, the state reads,
	// the due entries' moves) in round trips shared with other callers (a
	// pipeshare.Client on the same Redis); nil sends them on Redis.
	Shared Commands
	// Turns takes the expiry events (required): the order-worker's turns.
	Turns Turns
	// Prefix starts every key (the Processor's).
	Prefix string
	// Interval between scans. Default ScanIntervalDefault.
	Interval time.Duration
	// Lease is how long a claimed entry is out of sight. Default ScanLeaseDefault.
	Lease time.Duration
	// Batch bounds the entries a shard gives at a time. Default ScanBatchDefault.
	Batch int
	// MaxEventBytes bounds a submitted envelope as the Worker's (default domain.MaxEventBytes).
	MaxEventBytes int
	// Logger; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives the scanner's gauges; nil registers none.
	Registerer prometheus.Registerer
	// Now is the scanner's clock; nil: time.Now.
	Now func() time.Time
}

// Scanner finds the due holds and submits their order.reservation_expired into the
// orders' turns. Every order-worker replica runs one; the claim keeps them apart.
type Scanner struct {
	cfg ScannerConfig
	// shared sends the scanner's commands: ScannerConfig.Shared, or Redis.
	shared Commands
	due    prometheus.Gauge
	oldest prometheus.Gauge
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// NewScanner returns a Scanner, or what cfg lacks.
func NewScanner(cfg ScannerConfig) (*Scanner, error) {
	if cfg.Redis == nil || cfg.Turns == nil {
		return nil, errors.New("order: the scanner needs Redis and Turns")
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, "junban")
	if cfg.Interval <= 0 {
		cfg.Interval = ScanIntervalDefault
	}
	if cfg.Lease <= 0 {
		cfg.Lease = ScanLeaseDefault
	}
	if cfg.Batch <= 0 {
		cfg.Batch = ScanBatchDefault
	}
	cfg.MaxEventBytes = cmp.Or(max(cfg.MaxEventBytes, 0), domain.MaxEventBytes)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Scanner{cfg: cfg, shared: cmp.Or[Commands](cfg.Shared, cfg.Redis), stop: make(chan struct{}), done: make(chan struct{}),
		due: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "reservations", Name: "due",
			Help: "Holds past their hold_until and not claimed by a scanner, at this replica's last scan (the expiry backlog).",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "reservations", Name: "due_oldest_age_seconds",
			Help: "How long past its hold_until the oldest unclaimed due hold was at this replica's last scan (0: none due).",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.due, s.oldest} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// Start scans every Interval until Stop.
func (s *Scanner) Start(ctx context.Context) {
	go func() {
		defer close(s.done)
		tick := time.NewTicker(s.cfg.Interval)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := s.Scan(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("reservation scan", zap.Error(err))
			}
		}
	}()
}

// Stop ends the scans and waits for the one under way (its claimed entries not submitted
// yet come back to sight when their lease is over).
func (s *Scanner) Stop() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Scan runs one scan of every shard and returns how many expiries it submitted.
func (s *Scanner) Scan(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	var (
		backlog   int64
		oldest    *int64
		submitted int
		errs      []error
		claimed   []string
	)
	for shard := range DueShards {
		n, old, lcids, err := s.claim(ctx, shard, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		backlog += n
		if old != nil && (oldest == nil || *old < *oldest) {
			oldest = old
		}
		claimed = append(claimed, lcids...)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sema = make(chan struct{}, scanParallel)
	)
	for _, lcid := range claimed {
		sema <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sema; wg.Done() }()
			ok, err := s.expire(ctx, lcid, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if ok {
				submitted++
			}
		}()
	}
	wg.Wait()
	s.due.Set(float64(backlog))
	age := 0.0
	if oldest != nil {
		age = max(0, float64(dueScore(now)-*oldest)/1e6)
	}
	s.oldest.Set(age)
	return submitted, errors.Join(errs...)
}

// claimScore is the score of a claim made at now.
func (s *Scanner) claimScore(now time.Time) int64 { return dueScore(now.Add(s.cfg.Lease)) }

// claim takes a shard's due entries (due.lua) and returns the shard's backlog and oldest
// score before the claim, and the lcids claimed.
func (s *Scanner) claim(ctx context.Context, shard int, now time.Time) (int64, *int64, []string, error) {
	reply, err := dueScript.Run(ctx, s.shared, []string{DueKey(s.cfg.Prefix, shard)},
		dueScore(now), s.claimScore(now), s.cfg.Batch).Slice()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("order: due shard %d: %w", shard, err)
	}
	backlog, _ := reply[0].(int64)
	var oldest *int64
	if len(reply) > 1 {
		if str, ok := reply[1].(string); ok {
			if f, err := strconv.ParseFloat(str, 64); err == nil {
				o := int64(f)
				oldest = &o
			}
		}
	}
	var lcids []string
	for _, v := range reply[min(2, len(reply)):] {
		if lcid, ok := v.(string); ok {
			lcids = append(lcids, lcid)
		}
	}
	return backlog, oldest, lcids, nil
}

// expire handles one claimed entry: it reads the order's state and its turn's lock (one
// slot, one round trip). A due hold gets its expiry submitted (true); a hold still ahead
// has its entry scored at its time again; an order with no hold loses its entry, but only
// while no holder is in its turn: a step under way may have written the entry of a hold
// it has not committed yet (its commit is fenced by that lock), so the entry then stays
// claimed and is looked at again after the lease. The moves are conditional on the
// claim's score, so a hold written since is never undone.
func (s *Scanner) expire(ctx context.Context, lcid string, now time.Time) (bool, error) {
	claimed := s.claimScore(now)
	vals, err := s.shared.MGet(ctx, StateKey(s.cfg.Prefix, lcid), lockhandoff.Key(s.cfg.Prefix, lcid, "lock")).Result()
	if err != nil {
		return false, fmt.Errorf("order: state of %s: %w", lcid, err)
	}
	var st domain.State
	if raw, ok := vals[0].(string); ok {
		if st, err = domain.DecodeState([]byte(raw)); err != nil {
			return false, fmt.Errorf("order: state of %s: %w", lcid, err)
		}
	}
	_, held := vals[1].(string)
	hold := holdOf(st.Order)
	switch {
	case hold == nil && held:
		return false, nil
	case hold == nil:
		_, err := moveDue(ctx, s.shared, s.cfg.Prefix, lcid, claimed, nil)
		return false, err
	case hold.After(now):
		at := dueScore(*hold)
		_, err := moveDue(ctx, s.shared, s.cfg.Prefix, lcid, claimed, &at)
		return false, err
	}
	body, err := ExpiryEvent(lcid, *hold)
	if err != nil {
		return false, err
	}
	ev, err := domain.Decode(body, s.cfg.MaxEventBytes)
	if err != nil {
		return false, fmt.Errorf("order: expiry of %s: %w", lcid, err)
	}
	if _, err := s.cfg.Turns.Submit(ctx, lcid, Stamp(ctx, ev, body, s.cfg.MaxEventBytes)); err != nil {
		return false, fmt.Errorf("order: submit the expiry of %s: %w", lcid, err)
	}
	return true, nil
}

// ExpiryEvent is the order.reservation_expired of lcid's hold: its id is the hold's
// (event.ExpiryEventID) and it occurred at the hold, so every replica that finds the hold
// due submits the same event.
func ExpiryEvent(lcid string, hold time.Time) ([]byte, error) {
	data, err := json.Marshal(event.ReservationExpiredData{HoldUntil: hold.UTC()})
	if err != nil {
		return nil, err
	}
	return json.Marshal(event.Order{EventID: event.ExpiryEventID(lcid, hold), Type: event.OrderReservationExpired,
		LCID: lcid, OccurredAt: hold.UTC(), Data: data})
}
