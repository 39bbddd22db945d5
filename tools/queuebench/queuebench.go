// Package queuebench measures how fast a receipt fills a SKU's queue of waiting lines
// (docs/performance.md, "Waiting demand"): Lines backordered lines wait for one SKU, one
// adjustment brings the units they wait for, and FillRequests go on while a result says
// FillsMore (each operation fills at most stock.MaxResultFills lines), as the
// order-worker's SKU step does. It reports the lines filled per second and each line's
// delay from the receipt's start to the return of the operation that filled it, beside
// its baseline of the same run: as many one-unit allocations, one operation each, from a
// SKU that has the units (what the lines would cost placed one by one).
package queuebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/keyscan"
)

// Defaults of Options.
const (
	LinesDefault  = 2000
	RoundsDefault = 3
)

// Options of a run.
type Options struct {
	// Lines is how many lines wait, one unit each, when the receipt comes.
	Lines int
	// Rounds is how many receipts are measured, each against a fresh queue; the report's
	// figures are over all rounds' lines.
	Rounds int
	JSON   bool
}

// Report is a run's figures.
type Report struct {
	Lines  int `json:"lines"`
	Rounds int `json:"rounds"`
	// Operations are the ledger operations per receipt: the adjustment and the fills
	// after it (median over the rounds).
	Operations int `json:"operations_per_receipt"`
	// FillsPerSecond is the lines filled per second of a receipt, from its start to the
	// last line's fill (median over the rounds).
	FillsPerSecond float64 `json:"fills_per_s"`
	// Delay is the time from the receipt's start to the fill of each line, over every
	// round's lines.
	DelayP50MS float64 `json:"fill_delay_p50_ms"`
	DelayP99MS float64 `json:"fill_delay_p99_ms"`
	DelayMaxMS float64 `json:"fill_delay_max_ms"`
	// AllocationsPerSecond is the baseline: one-unit allocations a second, one operation
	// each, sequential like the fills (median over the rounds); FillsOfAllocations is
	// FillsPerSecond over it.
	AllocationsPerSecond float64 `json:"baseline_allocations_per_s"`
	FillsOfAllocations   float64 `json:"fills_of_allocations"`
}

// loader knows the benchmark's SKUs: each with one empty on-hand lot.
type loader struct{}

func (loader) LoadSKU(_ context.Context, sku string) (stock.SKU, error) {
	return stock.SKU{SKU: sku, Version: 1, Lots: []stock.Lot{{LotID: "L0", Kind: stock.KindOnHand, Good: true,
		RegSeq: 0, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate}}}, nil
}

// Run runs the rounds on the Redis of cfg, under a prefix of its own that it deletes.
func Run(ctx context.Context, cfg config.Redis, o Options, w io.Writer) error {
	if o.Lines < 1 || o.Rounds < 1 {
		return errors.New("queuebench: --lines and --rounds must be positive")
	}
	rc, err := cfg.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	prefix := fmt.Sprintf("%s:qb%d", cfg.KeyPrefix, time.Now().UnixNano()%1e9)
	defer cleanup(context.WithoutCancel(ctx), rc, prefix)
	l, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: loader{}})
	if err != nil {
		return err
	}
	rep := Report{Lines: o.Lines, Rounds: o.Rounds}
	var delays []time.Duration
	var rates, allocs []float64
	var ops []int
	for round := range o.Rounds {
		d, n, err := receipt(ctx, l, "Q"+strconv.Itoa(round), o.Lines)
		if err != nil {
			return err
		}
		a, err := allocations(ctx, l, "A"+strconv.Itoa(round), o.Lines)
		if err != nil {
			return err
		}
		delays = append(delays, d...)
		rates = append(rates, float64(o.Lines)/slices.Max(d).Seconds())
		allocs = append(allocs, a)
		ops = append(ops, n)
		if !o.JSON {
			fmt.Fprintf(w, "bench queue: round %d/%d: %d lines filled in %d operations, %.0f lines/s; %.0f allocations/s\n",
				round+1, o.Rounds, o.Lines, n, rates[len(rates)-1], a)
		}
	}
	slices.Sort(delays)
	rep.FillsPerSecond, rep.Operations, rep.AllocationsPerSecond = median(rates), median(ops), median(allocs)
	rep.FillsOfAllocations = rep.FillsPerSecond / rep.AllocationsPerSecond
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep.DelayP50MS, rep.DelayP99MS, rep.DelayMaxMS = ms(delays[len(delays)/2]), ms(delays[len(delays)*99/100]), ms(delays[len(delays)-1])
	return print(w, rep, o.JSON)
}

// receipt queues lines one-unit lines on sku, then brings lines units and fills them all;
// it returns each line's delay from the receipt's start and the operations it took.
func receipt(ctx context.Context, l *ledger.Ledger, sku string, lines int) ([]time.Duration, int, error) {
	for i := range lines {
		r, err := l.Apply(ctx, stock.BackorderRequest{OpID: fmt.Sprintf("b%d", i), SKU: sku, Holder: fmt.Sprintf("o%d", i),
			Line: "1", Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip})
		if err != nil {
			return nil, 0, err
		}
		if r.Queued != 1 {
			return nil, 0, fmt.Errorf("queuebench: line %d queued %d, want 1", i, r.Queued)
		}
	}
	start := time.Now()
	r, err := l.Apply(ctx, stock.AdjustRequest{OpID: "receipt", SKU: sku, LotID: "L0", Delta: int64(lines), Reason: "receipt"})
	var delays []time.Duration
	for n := 1; ; n++ {
		if err != nil {
			return nil, 0, err
		}
		for range r.Fills {
			delays = append(delays, time.Since(start))
		}
		if !r.FillsMore {
			if len(delays) != lines {
				return nil, 0, fmt.Errorf("queuebench: %d of %d lines filled", len(delays), lines)
			}
			return delays, n, nil
		}
		r, err = l.Apply(ctx, stock.FillRequest{OpID: "fill-" + strconv.Itoa(n), SKU: sku})
	}
}

// allocations allocates lines one-unit lines, one operation each, from a SKU that has
// the units, and returns their rate.
func allocations(ctx context.Context, l *ledger.Ledger, sku string, lines int) (float64, error) {
	if _, err := l.Apply(ctx, stock.AdjustRequest{OpID: "stock", SKU: sku, LotID: "L0", Delta: int64(lines), Reason: "stock"}); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := range lines {
		if _, err := l.Apply(ctx, stock.AllocateRequest{OpID: fmt.Sprintf("a%d", i), SKU: sku, Holder: fmt.Sprintf("o%d", i),
			Qty: 1, TargetDate: "2026-12-01", Mode: stock.ModeShip}); err != nil {
			return 0, err
		}
	}
	return float64(lines) / time.Since(start).Seconds(), nil
}

// median is the middle of xs (the upper one of an even count); it sorts xs.
func median[T int | float64](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

func print(w io.Writer, r Report, asJSON bool) error {
	if asJSON {
		return cli.WriteJSON(w, r)
	}
	_, err := fmt.Fprintf(w, "bench queue: %d waiting lines, one receipt for all, %d rounds\n"+
		"  %d operations per receipt (the adjustment, then fills of %d lines each)\n"+
		"  %.0f lines filled per second; baseline: %.0f one-unit allocations per second, one operation each (%.2fx)\n"+
		"  receipt start -> fill: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		r.Lines, r.Rounds, r.Operations, stock.MaxResultFills, r.FillsPerSecond, r.AllocationsPerSecond, r.FillsOfAllocations,
		r.DelayP50MS, r.DelayP99MS, r.DelayMaxMS)
	return err
}

// cleanup deletes the run's keys (best effort: the prefix is the run's own).
func cleanup(ctx context.Context, rc redis.UniversalClient, prefix string) {
	_ = keyscan.Each(ctx, rc, keyscan.Escape(prefix)+":*", "", func(k string) error { return rc.Del(ctx, k).Err() })
}
