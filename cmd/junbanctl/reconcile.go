package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/persist"
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
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl reconcile [--repair] [--skus-only] [--progress-min N] [-v]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: reconcile takes no arguments, got %q", errUsage, fs.Args())
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

	var bar *progressbar.ProgressBar
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
				bar = progressbar.NewOptions(total,
					progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription("reconcile"),
					progressbar.OptionShowCount(),
					progressbar.OptionShowIts(),
					progressbar.OptionSetItsString("entities"),
					progressbar.OptionThrottle(100_000_000), // 100 ms
					progressbar.OptionClearOnFinish(),
				)
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
	for _, d := range rep.Drifts {
		line := d.String()
		if !*verbose && len(line) > 300 {
			line = line[:300] + " ... (-v for all)"
		}
		fmt.Println("  " + line)
		if d.Repaired {
			repaired++
		}
	}
	fmt.Println()
	if *repair {
		fmt.Printf("repaired %d: rewrote the SKU and lot rows (orders: the order row) from Redis where PostgreSQL was behind or missing\n", repaired)
	}
	if n := rep.Remaining(); n > 0 {
		var hints []string
		for _, k := range []persist.DriftKind{persist.Behind, persist.Missing, persist.Ahead, persist.Diverged} {
			if c := countKind(rep, k); c > 0 {
				hints = append(hints, hint(k, c, *repair))
			}
		}
		fmt.Println(strings.Join(hints, "\n"))
		return fmt.Errorf("%d drift(s) remain", n)
	}
	fmt.Println("no drift remains")
	return nil
}

func countKind(rep persist.ReconcileReport, k persist.DriftKind) int {
	n := 0
	for _, d := range rep.Drifts {
		if d.Kind == k && !d.Repaired {
			n++
		}
	}
	return n
}

func hint(k persist.DriftKind, n int, repaired bool) string {
	switch k {
	case persist.Behind, persist.Missing:
		if repaired {
			return fmt.Sprintf("%d %s: Redis moved on while repairing; run again", n, k)
		}
		return fmt.Sprintf("%d %s: results may still be in the results queue (let the persist-worker drain it and run again), or run with --repair", n, k)
	case persist.Ahead:
		return fmt.Sprintf("%d ahead: PostgreSQL is newer than Redis (Redis lost data?); not repaired from Redis: see docs/persistence.md", n)
	default:
		return fmt.Sprintf("%d diverged: same version, different content; not repaired automatically: investigate", n)
	}
}
