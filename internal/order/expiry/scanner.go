// Package expiry finds the due holds of reserved orders and submits their
// order.reservation_expired into the orders' turns: the Scanner claims the due entries of
// the due index the order's step writes (internal/order, due.go), so that of the
// order-worker's replicas, which each run one, one submits each expiry
// (docs/architecture.md, "Reservations that expire").
package expiry

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
)

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
)

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
	Shared order.Commands
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
	// MaxEventBytes bounds a submitted envelope as intake.Worker's (default domain.MaxEventBytes).
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
	shared order.Commands
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
	s := &Scanner{cfg: cfg, shared: cmp.Or[order.Commands](cfg.Shared, cfg.Redis), stop: make(chan struct{}), done: make(chan struct{}),
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
	for shard := range order.DueShards {
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
		age = max(0, float64(order.DueScore(now)-*oldest)/1e6)
	}
	s.oldest.Set(age)
	return submitted, errors.Join(errs...)
}

// claimScore is the score of a claim made at now.
func (s *Scanner) claimScore(now time.Time) int64 { return order.DueScore(now.Add(s.cfg.Lease)) }

// claim takes a shard's due entries (due.lua) and returns the shard's backlog and oldest
// score before the claim, and the lcids claimed.
func (s *Scanner) claim(ctx context.Context, shard int, now time.Time) (int64, *int64, []string, error) {
	reply, err := dueScript.Run(ctx, s.shared, []string{order.DueKey(s.cfg.Prefix, shard)},
		order.DueScore(now), s.claimScore(now), s.cfg.Batch).Slice()
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
	vals, err := s.shared.MGet(ctx, order.StateKey(s.cfg.Prefix, lcid), lockhandoff.Key(s.cfg.Prefix, lcid, "lock")).Result()
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
	hold := order.HoldOf(st.Order)
	switch {
	case hold == nil && held:
		return false, nil
	case hold == nil:
		_, err := order.MoveDue(ctx, s.shared, s.cfg.Prefix, lcid, claimed, nil)
		return false, err
	case hold.After(now):
		at := order.DueScore(*hold)
		_, err := order.MoveDue(ctx, s.shared, s.cfg.Prefix, lcid, claimed, &at)
		return false, err
	}
	body, err := Event(lcid, *hold)
	if err != nil {
		return false, err
	}
	ev, err := domain.Decode(body, s.cfg.MaxEventBytes)
	if err != nil {
		return false, fmt.Errorf("order: expiry of %s: %w", lcid, err)
	}
	if _, err := s.cfg.Turns.Submit(ctx, lcid, order.Stamp(ctx, ev, body, s.cfg.MaxEventBytes)); err != nil {
		return false, fmt.Errorf("order: submit the expiry of %s: %w", lcid, err)
	}
	return true, nil
}

// Event is the order.reservation_expired of lcid's hold: its id is the hold's
// (event.ExpiryEventID) and it occurred at the hold, so every replica that finds the hold
// due submits the same event.
func Event(lcid string, hold time.Time) ([]byte, error) {
	data, err := json.Marshal(event.ReservationExpiredData{HoldUntil: hold.UTC()})
	if err != nil {
		return nil, err
	}
	return json.Marshal(event.Order{EventID: event.ExpiryEventID(lcid, hold), Type: event.OrderReservationExpired,
		LCID: lcid, OccurredAt: hold.UTC(), Data: data})
}
