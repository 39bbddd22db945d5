package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/persist"
	"github.com/junban/junban/internal/progress"
)

// reconcileConfig is what reconcile reads from the environment.
type reconcileConfig struct {
	config.Redis
	config.Postgres
}

// runReconcile compares every SKU and order in Redis with PostgreSQL, prints the drift
// and, with --repair, rewrites PostgreSQL from Redis where Redis is newer. It fails when
// drift remains.
func runReconcile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	repair := fs.Bool("repair", false, "rewrite PostgreSQL from Redis for SKUs and orders that PostgreSQL holds an older version of (or none)")
	noOrders := fs.Bool("skus-only", false, "compare SKUs only, not orders")
	progressMin := fs.Int("progress-min", 1000, "show a progress bar (on stderr) from this many SKUs and orders on")
	verbose := fs.Bool("v", false, "print every differing field, however long")
	maxDrifts := fs.Int("max-drifts", 1000, "print the first N drifts (0: all); the counts and the exit status cover every drift")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl reconcile [--repair] [--skus-only] [--progress-min N] [--max-drifts N] [-v]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	cfg, err := config.Load[reconcileConfig]()
	if err != nil {
		return err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	db, err := cfg.Postgres.Open()
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}

	var bar progress.Bar
	rcfg := persist.ReconcileConfig{
		DB: db,
		// No loader: reconcile looks at what Redis holds and never loads a SKU into it.
		SKUs:   ledger.New(rc, cfg.KeyPrefix, nil, ledger.Config{}),
		Repair: *repair,
		Progress: func(done, total int) {
			if total < *progressMin {
				return
			}
			if bar == nil {
				bar = progress.New(os.Stderr, total, "reconcile")
			}
			bar.Set(done)
		},
	}
	if !*noOrders {
		rcfg.Orders = order.NewStore(rc, cfg.KeyPrefix)
	}
	rep, err := persist.Reconcile(ctx, rcfg)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}

	orders := fmt.Sprintf("%d orders", rep.Orders)
	if !rep.OrdersCompared {
		orders = "no orders (--skus-only)"
	}
	fmt.Printf("reconcile: compared %d SKUs and %s in Redis (prefix %q) with PostgreSQL\n", rep.SKUs, orders, cfg.KeyPrefix)
	if len(rep.Drifts) == 0 {
		fmt.Println("no drift")
		return nil
	}
	fmt.Printf("\ndrift (%d):\n", len(rep.Drifts))
	repaired := 0
	for i, d := range rep.Drifts {
		if d.Repaired {
			repaired++
		}
		if *maxDrifts > 0 && i >= *maxDrifts {
			continue
		}
		line := d.String()
		if !*verbose && len(line) > 300 {
			line = line[:300] + " ... (-v for all)"
		}
		fmt.Println("  " + line)
	}
	if n := len(rep.Drifts) - *maxDrifts; *maxDrifts > 0 && n > 0 {
		fmt.Printf("  ... and %d more (--max-drifts 0 prints all)\n", n)
	}
	fmt.Println()
	if *repair {
		fmt.Printf("repaired %d: rewrote the SKU and lot rows (orders: the order row) from Redis where PostgreSQL was behind or missing\n", repaired)
	}
	if n := rep.Remaining(); n > 0 {
		fmt.Println(strings.Join(hints(rep), "\n"))
		return fmt.Errorf("%d drift(s) remain", n)
	}
	fmt.Println("no drift remains")
	return nil
}

// hints says, for the drifts that remain, what they likely mean and what to do.
func hints(rep persist.ReconcileReport) []string {
	var movedOn, left int
	kinds := map[persist.DriftKind]int{}
	for _, d := range rep.Drifts {
		switch {
		case d.Repaired:
		case d.MovedOn():
			movedOn++
		case d.Left != nil:
			left++
		default:
			kinds[d.Kind]++
		}
	}
	var out []string
	for _, k := range []persist.DriftKind{persist.Behind, persist.Missing} {
		if n := kinds[k]; n > 0 {
			out = append(out, fmt.Sprintf("%d %s: results may still be in the results queue or its DLQ (let the persist-worker drain it and run again), or run with --repair", n, k))
		}
	}
	if movedOn > 0 {
		out = append(out, fmt.Sprintf("%d behind or missing after the repair: Redis moved on while repairing; run again", movedOn))
	}
	if left > 0 {
		out = append(out, fmt.Sprintf("%d still differ after the repair in a way Redis moving on does not explain: rows PostgreSQL got meanwhile, which the version guard keeps (see \"after the repair\" on each line); run again, and investigate if they stay", left))
	}
	if n := kinds[persist.Ahead]; n > 0 {
		out = append(out, fmt.Sprintf("%d ahead: PostgreSQL is newer than Redis (Redis lost data?); not repaired from Redis: see docs/persistence.md", n))
	}
	if n := kinds[persist.Diverged]; n > 0 {
		out = append(out, fmt.Sprintf("%d diverged: a row at Redis's version with other content, or a lot Redis does not hold, which no queued result explains; not repaired automatically: investigate", n))
	}
	return out
}
