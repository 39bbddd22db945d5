package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/tools/allocbench"
)

// benchAllocOptions are the flags of bench alloc.
type benchAllocOptions struct {
	allocbench.Options
	asJSON      bool
	baselineRev string
}

func benchAllocCmd() *cobra.Command {
	var o benchAllocOptions
	c := &cobra.Command{
		Use:   "alloc",
		Short: "benchmark the allocation script against its previous version, a JSON document and PostgreSQL",
		Long: "alloc measures junban's allocation script against the script before the warehouse operations,\n" +
			"a JSON-document script, PostgreSQL with SELECT ... FOR UPDATE and a trivial EVALSHA, on one\n" +
			"hot SKU, and times RegisterLot beside an allocation: see docs/performance.md. The script before\n" +
			"the warehouse operations is read from git (--baseline): run it inside a clone of junban.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runBenchAlloc(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.IntVar(&o.Lots, "lots", allocbench.LotsDefault, "lots of the hot SKU")
	fs.DurationVar(&o.Duration, "duration", allocbench.DurationDefault, "total duration of each variant, split over --rounds turns")
	fs.IntVar(&o.Rounds, "rounds", allocbench.RoundsDefault, "turns per variant (figures are medians over them)")
	fs.IntVar(&o.Clients, "clients", allocbench.ClientsDefault, "concurrent clients of every variant")
	fs.BoolVar(&o.Sweep, "sweep", true, "also measure junban at 1, 10, 100 and 1000 lots (usual and worst case)")
	fs.BoolVar(&o.Locations, "locations", true, "also measure one unit routed (ranked) over 20 lots at each of 1, 5, 20 and 50 locations, beside unrouted")
	fs.BoolVar(&o.asJSON, "json", false, "print the figures as JSON")
	fs.IntVar(&o.PGConns, "pg-conns", 0, "PostgreSQL connections of the row-lock variant (default: --clients)")
	fs.BoolVar(&o.Registration, "registration", true, "also time RegisterLot beside an allocation on SKUs of 100 and 1,000 lots")
	fs.StringVar(&o.baselineRev, "baseline", allocbench.BaselineDefault, "revision whose allocation script junban_before runs, read with git show REV:internal/ledger/...; it must take the hash layout of "+allocbench.BaselineDefault+"'s")
	return c
}

// runBenchAlloc measures junban's allocation script against a JSON-document script,
// PostgreSQL with SELECT ... FOR UPDATE and a trivial EVALSHA, on one hot SKU.
func runBenchAlloc(ctx context.Context, w io.Writer, o benchAllocOptions) error {
	if o.Lots < 1 || o.Lots > 100_000 || o.Clients < 1 || o.Duration <= 0 || o.Rounds < 1 {
		return cli.Usagef("--lots 1..100000, --clients >= 1, --duration > 0, --rounds >= 1")
	}
	// Before any connection: a clone without the baseline fails at once.
	baseline, err := allocbench.ReadBaseline(ctx, "", o.baselineRev)
	if err != nil {
		return err
	}
	rcfg, err := config.Load[config.Redis]()
	if err != nil {
		return err
	}
	pcfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	rc, err := redisPool(rcfg, o.Clients+4)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	db, err := pcfg.Open()
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	opt := o.Options
	opt.Prefix = rcfg.KeyPrefix + ":benchalloc:" + randomID()
	opt.Baseline = baseline
	rep, err := allocbench.Run(ctx, rc, db, opt, os.Stderr)
	if err != nil {
		return err
	}
	if o.asJSON {
		return cli.WriteJSON(w, rep)
	}
	printBenchAlloc(w, rep, opt, o.baselineRev)
	return nil
}

// redisPool is a client of cfg's Redis (cluster or not) with a pool of size connections.
func redisPool(cfg config.Redis, size int) (redis.UniversalClient, error) {
	if cfg.Cluster {
		opt, err := redis.ParseClusterURL(cfg.URL)
		if err != nil {
			return nil, err
		}
		opt.PoolSize = size
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = size
	return redis.NewClient(opt), nil
}

func printBenchAlloc(w io.Writer, rep allocbench.Report, opt allocbench.Options, baseline string) {
	fmt.Fprintf(w, "bench alloc: %d lots, %d clients, %s per variant in %d rounds (medians)\n", rep.Lots, rep.Clients, opt.Duration, opt.Rounds)
	fmt.Fprintf(w, "  junban            %10.0f ops/s  (%.2fx of the ceiling, %.2fx of junban_before)\n", rep.Junban, rep.Ratios.JunbanOfCeiling, rep.Ratios.JunbanOfBefore)
	fmt.Fprintf(w, "  junban_holder     %10.0f ops/s  (%.2fx of the ceiling, %.2fx of junban_before)\n", rep.JunbanHolder, rep.Ratios.HolderOfCeiling, rep.Ratios.HolderOfBefore)
	fmt.Fprintf(w, "  junban_before     %10.0f ops/s  (%.2fx of the ceiling; the script of %s)\n", rep.JunbanBefore, rep.Ratios.BeforeOfCeiling, baseline)
	fmt.Fprintf(w, "  jsondoc           %10.0f ops/s  (junban %.1fx)\n", rep.JSONDoc, rep.Junban/rep.JSONDoc)
	fmt.Fprintf(w, "  pg_rowlock        %10.0f ops/s  (junban %.1fx)\n", rep.PGRowLock, rep.Junban/rep.PGRowLock)
	fmt.Fprintf(w, "  evalsha_ceiling   %10.0f ops/s  (junban %.2fx of it)\n", rep.EvalshaCeiling, rep.Junban/rep.EvalshaCeiling)
	for _, n := range []string{"1", "10", "100", "1000"} {
		if r, ok := rep.JunbanByLots[n]; ok {
			fmt.Fprintf(w, "  junban %4s lots   %10.0f ops/s  worst case (every lot read) %10.0f ops/s\n", n, r, rep.JunbanWorstByLots[n])
		}
	}
	for _, b := range rep.ByLocations {
		fmt.Fprintf(w, "  %2d locations (%4d lots)  routed %8.0f ops/s %7.1f usec/call (%.2fx of 1 location routed)   unrouted %8.0f ops/s %7.1f usec/call\n",
			b.Locations, b.Locations*allocbench.LocationLots, b.RoutedOps, b.RoutedUsecPerCall, b.RoutedOfSingleRouted, b.UnroutedOps, b.UnroutedUsecPerCall)
	}
	for _, r := range rep.Registration {
		fmt.Fprintf(w, "  %4d lots (up to %d)  RegisterLot %8.0f ops/s %7.1f usec/call   Allocate+holder %8.0f ops/s %7.1f usec/call\n",
			r.Lots, r.MaxLotsDuringRun, r.RegisterOps, r.RegisterUsecPerCall, r.AllocateOps, r.AllocateUsecPerCall)
	}
	fmt.Fprintln(w, "  Redis's own account per call (INFO commandstats): time inside EVALSHA; commands the script ran")
	for _, name := range slices.Sorted(maps.Keys(rep.Profile)) {
		p := rep.Profile[name]
		var calls []string
		for c, n := range p.InnerCallsPerOp {
			calls = append(calls, fmt.Sprintf("%s x%g", c, n))
		}
		sort.Strings(calls)
		fmt.Fprintf(w, "  %-24s %8.1f usec  %s (%.1f usec of them)\n", name, p.ScriptUsecPerCall, strings.Join(calls, ", "), p.InnerUsecPerOp)
	}
}
