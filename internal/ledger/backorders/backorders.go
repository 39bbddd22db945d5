// Package backorders measures the ledger's waiting demand for the people on call: a scan
// of every SKU's queue of waiting lines (docs/ledger.md, "Waiting demand") sets
// junban_backorder_lines and junban_backorder_oldest_wait_seconds (docs/operations.md).
package backorders

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/ledger/stock"
)

// IntervalDefault is the time between two scans (JUNBAN_API_BACKORDER_SCAN_INTERVAL's
// default).
const IntervalDefault = 30 * time.Second

// Queues is what a scan reads of the ledger: *ledger.Ledger.
type Queues interface {
	// ScanQueues calls fn with every SKU whose queue holds a line, maybe concurrently.
	ScanQueues(ctx context.Context, fn func(sku string) error) error
	// Queue returns a SKU's waiting lines.
	Queue(ctx context.Context, sku string) ([]stock.QueueEntry, error)
}

// Config configures the Gauges.
type Config struct {
	// Queues are the ledger's (required).
	Queues Queues
	// Interval between scans. Default IntervalDefault.
	Interval time.Duration
	// Logger receives a failed scan; nil logs nothing.
	Logger *zap.Logger
	// Registerer receives the gauges; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock the waits are measured with; nil: time.Now.
	Now func() time.Time
}

// Stats is what one scan found.
type Stats struct {
	// Lines is the waiting lines over every SKU.
	Lines int
	// Oldest is the earliest time a waiting line was queued at; zero when none waits
	// (a line queued without a time does not count).
	Oldest time.Time
}

// Gauges hold the figures of the last scan that succeeded.
type Gauges struct {
	cfg    Config
	lines  prometheus.Gauge
	oldest prometheus.Gauge
}

// New returns the Gauges, registered, or what cfg lacks.
func New(cfg Config) (*Gauges, error) {
	if cfg.Queues == nil {
		return nil, errors.New("backorders: the gauges need the ledger's queues")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gauges{cfg: cfg,
		lines: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "backorder", Name: "lines",
			Help: "Order lines waiting in the SKUs' queues for stock, at the last scan.",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "junban", Subsystem: "backorder", Name: "oldest_wait_seconds",
			Help: "How long the longest-waiting queued line had waited at the last scan (0: none waits).",
		}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{g.lines, g.oldest} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// Run scans at once, then every Interval until ctx ends; a failed scan is logged and
// leaves the gauges as the last good one set them.
func (g *Gauges) Run(ctx context.Context) error {
	tick := time.NewTicker(g.cfg.Interval)
	defer tick.Stop()
	for {
		if _, err := g.Scan(ctx); err != nil && ctx.Err() == nil {
			g.cfg.Logger.Warn("backorder scan", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Scan reads every SKU's queue and, when it read them all, sets the gauges.
func (g *Gauges) Scan(ctx context.Context) (Stats, error) {
	var (
		mu sync.Mutex
		st Stats
	)
	err := g.cfg.Queues.ScanQueues(ctx, func(sku string) error {
		q, err := g.cfg.Queues.Queue(ctx, sku)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		st.Lines += len(q)
		for _, e := range q {
			if at := time.UnixMilli(e.QueuedAt); e.QueuedAt > 0 && (st.Oldest.IsZero() || at.Before(st.Oldest)) {
				st.Oldest = at
			}
		}
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	g.lines.Set(float64(st.Lines))
	wait := 0.0
	if !st.Oldest.IsZero() {
		wait = max(0, g.cfg.Now().Sub(st.Oldest).Seconds())
	}
	g.oldest.Set(wait)
	return st, nil
}
