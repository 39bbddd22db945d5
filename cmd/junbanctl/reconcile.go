package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/event"
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
		rcfg.Orders = redisOrders{rc: rc, prefix: cfg.KeyPrefix}
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

// redisOrders reads order states where the order-worker keeps them.
type redisOrders struct {
	rc     redis.UniversalClient
	prefix string
}

func (o redisOrders) Order(ctx context.Context, lcid string) (*event.OrderSnapshot, int64, error) {
	st, err := order.LoadState(ctx, o.rc, o.prefix, lcid)
	return st.Order, st.Seq, err
}

func (o redisOrders) ScanOrders(ctx context.Context, fn func(lcid string) error) error {
	// Keys look like <prefix>:{<entity>}:state; SKU entities hold no order.
	head, tail, _ := strings.Cut(order.StateKey(o.prefix, "\x00"), "\x00")
	pattern := o.escape(head) + "*" + o.escape(tail)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			entity := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), head), tail)
			if strings.HasPrefix(entity, "sku:") {
				continue
			}
			if err := fn(entity); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := o.rc.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, o.rc)
}

// escape quotes the glob characters of s for SCAN MATCH.
func (redisOrders) escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
