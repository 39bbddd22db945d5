package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/progress"
	"github.com/junban/junban/internal/postgres/persist"
)

// reconcileOptions are the flags of reconcile.
type reconcileOptions struct {
	repair, skusOnly, verbose, asJSON bool
	progressMin, maxDrifts            int
}

func reconcileCmd() *cobra.Command {
	var o reconcileOptions
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "compare Redis with PostgreSQL; --repair rewrites PostgreSQL",
		Long: "reconcile compares every SKU and order in Redis with PostgreSQL, prints the drift and, with\n" +
			"--repair, rewrites PostgreSQL from Redis where Redis is newer. It fails (exit 1) when drift remains.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runReconcile(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.BoolVar(&o.repair, "repair", false, "rewrite PostgreSQL from Redis for SKUs and orders that PostgreSQL holds an older version of (or none)")
	fs.BoolVar(&o.skusOnly, "skus-only", false, "compare SKUs only, not orders")
	fs.IntVar(&o.progressMin, "progress-min", 1000, "show a progress bar (on stderr) from this many SKUs and orders on")
	fs.BoolVarP(&o.verbose, "v", "v", false, "print every differing field, however long")
	fs.IntVar(&o.maxDrifts, "max-drifts", 1000, "print the first N drifts (0: all); the counts and the exit status cover every drift")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON (every drift, whole)")
	return c
}

// runReconcile compares every SKU and order in Redis with PostgreSQL, prints the drift
// and, with --repair, rewrites PostgreSQL from Redis where Redis is newer. It fails when
// drift remains.
func runReconcile(ctx context.Context, w io.Writer, o reconcileOptions) error {
	st, err := openStores(0)
	if err != nil {
		return err
	}
	defer st.close()
	// No loader: reconcile looks at what Redis holds and never loads a SKU into it.
	led, err := ledger.New(ledger.Config{Redis: st.rc, Prefix: st.prefix})
	if err != nil {
		return err
	}
	rcfg := persist.ReconcileConfig{DB: st.db, SKUs: led, Repair: o.repair}
	if !o.skusOnly {
		rcfg.Orders = order.NewStore(st.rc, st.prefix)
	}
	bar := lazyBar{min: o.progressMin, what: "reconcile"}
	rcfg.Progress = bar.set
	rep, err := persist.Reconcile(ctx, rcfg)
	bar.finish()
	if err != nil {
		return err
	}
	if o.asJSON {
		if err := cli.WriteJSON(w, newReconcileJSON(st.prefix, o.repair, rep)); err != nil {
			return err
		}
	} else {
		printReconcile(w, st.prefix, o, rep)
	}
	if n := rep.Remaining(); n > 0 {
		return fmt.Errorf("%d drift(s) remain", n)
	}
	return nil
}

func printReconcile(w io.Writer, prefix string, o reconcileOptions, rep persist.ReconcileReport) {
	orders := fmt.Sprintf("%d orders", rep.Orders)
	if !rep.OrdersCompared {
		orders = "no orders (--skus-only)"
	}
	fmt.Fprintf(w, "reconcile: compared %d SKUs and %s in Redis (prefix %q) with PostgreSQL\n", rep.SKUs, orders, prefix)
	if len(rep.Drifts) == 0 {
		fmt.Fprintln(w, "no drift")
		return
	}
	fmt.Fprintf(w, "\ndrift (%d):\n", len(rep.Drifts))
	for i, d := range rep.Drifts {
		if o.maxDrifts > 0 && i >= o.maxDrifts {
			break
		}
		line := d.String()
		if !o.verbose && len(line) > 300 {
			line = line[:300] + " ... (-v for all)"
		}
		fmt.Fprintln(w, "  "+line)
	}
	if n := len(rep.Drifts) - o.maxDrifts; o.maxDrifts > 0 && n > 0 {
		fmt.Fprintf(w, "  ... and %d more (--max-drifts 0 prints all)\n", n)
	}
	if by := rep.ByLocation(); len(by) > 0 {
		var parts []string
		for _, l := range slices.Sorted(maps.Keys(by)) {
			parts = append(parts, fmt.Sprintf("%s %d", l, by[l]))
		}
		fmt.Fprintf(w, "SKUs drifting by location (of their differing lots): %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if o.repair {
		fmt.Fprintf(w, "repaired %d: rewrote the SKU and lot rows (orders: the order row) from Redis where PostgreSQL was behind or missing\n", repairedCount(rep))
	}
	if rep.Remaining() > 0 {
		fmt.Fprintln(w, strings.Join(hints(rep), "\n"))
		return
	}
	fmt.Fprintln(w, "no drift remains")
}

func repairedCount(rep persist.ReconcileReport) int {
	n := 0
	for _, d := range rep.Drifts {
		if d.Repaired {
			n++
		}
	}
	return n
}

// reconcileJSON is reconcile's report with --json; its field names are stable.
type reconcileJSON struct {
	KeyPrefix      string      `json:"key_prefix"`
	SKUs           int         `json:"skus"`
	Orders         int         `json:"orders"`
	OrdersCompared bool        `json:"orders_compared"`
	Repair         bool        `json:"repair"`
	Repaired       int         `json:"repaired"`
	Remaining      int         `json:"remaining"`
	Drifts         []driftJSON `json:"drifts"`
	// ByLocation counts the SKUs whose remaining drift involves a lot at each location.
	ByLocation map[string]int `json:"by_location"`
	Hints      []string       `json:"hints"`
}

// driftJSON is one persist.Drift.
type driftJSON struct {
	Entity   string   `json:"entity"`
	Key      string   `json:"key"`
	Kind     string   `json:"kind"`
	Redis    int64    `json:"redis"`
	Postgres int64    `json:"postgres"`
	Details  []string `json:"details"`
	// Locations are a SKU's differing lots' locations.
	Locations []string   `json:"locations,omitempty"`
	Repaired  bool       `json:"repaired"`
	MovedOn   bool       `json:"moved_on,omitempty"`
	Left      *driftJSON `json:"left,omitempty"`
}

func newDriftJSON(d persist.Drift) driftJSON {
	j := driftJSON{Entity: d.Entity, Key: d.Key, Kind: string(d.Kind), Redis: d.Redis, Postgres: d.Postgres,
		Details: append([]string{}, d.Details...), Locations: d.Locations, Repaired: d.Repaired, MovedOn: d.MovedOn()}
	if d.Left != nil {
		l := newDriftJSON(*d.Left)
		j.Left = &l
	}
	return j
}

func newReconcileJSON(prefix string, repair bool, rep persist.ReconcileReport) reconcileJSON {
	j := reconcileJSON{KeyPrefix: prefix, SKUs: rep.SKUs, Orders: rep.Orders, OrdersCompared: rep.OrdersCompared,
		Repair: repair, Repaired: repairedCount(rep), Remaining: rep.Remaining(), Drifts: []driftJSON{}, ByLocation: rep.ByLocation(), Hints: []string{}}
	for _, d := range rep.Drifts {
		j.Drifts = append(j.Drifts, newDriftJSON(d))
	}
	if j.Remaining > 0 {
		j.Hints = append(j.Hints, hints(rep)...)
	}
	return j
}

// lazyBar is a progress bar on standard error that appears once the total reaches min.
type lazyBar struct {
	min  int
	what string
	bar  progress.Bar
}

func (b *lazyBar) set(done, total int) {
	if total < b.min {
		return
	}
	if b.bar == nil {
		b.bar = progress.New(os.Stderr, total, b.what)
	}
	b.bar.Set(done)
}

func (b *lazyBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
	}
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
