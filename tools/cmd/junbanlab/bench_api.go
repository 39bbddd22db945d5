package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/tools/apibench"
	"github.com/junban/junban/tools/e2ebench"
)

// benchAPIOptions are the flags of bench api.
type benchAPIOptions struct {
	apibench.Options
	asJSON, fleet bool
	rate          float64
	binDir        string
}

func benchAPICmd() *cobra.Command {
	var o benchAPIOptions
	c := &cobra.Command{
		Use:   "api",
		Short: "benchmark availability reads through the API against a bare Redis GET, and a cart against single calls",
		Long: "api measures availability reads through junban-api's handler against a bare Redis GET of an\n" +
			"answer-sized value through the same HTTP server, while allocators work on the same SKUs, and a\n" +
			"cart of every SKU against as many single calls.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runBenchAPI(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.IntVar(&o.SKUs, "skus", apibench.SKUsDefault, "SKUs read, and the cart's size")
	fs.IntVar(&o.Lots, "lots", apibench.LotsDefault, "lots per SKU")
	fs.DurationVar(&o.Duration, "duration", apibench.DurationDefault, "measured time of each variant per round")
	fs.IntVar(&o.Clients, "clients", apibench.ClientsDefault, "concurrent HTTP clients")
	fs.IntVar(&o.Allocators, "allocators", apibench.AllocatorsDefault, "concurrent allocate+release loops on the same SKUs (0: none)")
	fs.IntVar(&o.Rounds, "rounds", apibench.RoundsDefault, "rounds; the variants alternate, figures are medians")
	fs.BoolVar(&o.asJSON, "json", false, "print the figures as JSON")
	fs.BoolVar(&o.fleet, "fleet", true, "the writes are an order-worker's allocations of order events (false: --allocators in-process ledger loops)")
	fs.Float64Var(&o.rate, "rate", 200, "with --fleet: order events sent per second")
	fs.StringVar(&o.binDir, "bin", "", "with --fleet: directory of the binaries (default: beside junbanlab)")
	return c
}

// runBenchAPI measures availability reads through junban-api's handler against a bare
// Redis GET of an answer-sized value through the same HTTP server, while allocators work
// on the same SKUs, and a cart of every SKU against as many single calls.
func runBenchAPI(ctx context.Context, w io.Writer, o benchAPIOptions) error {
	if o.SKUs < 1 || o.SKUs > 1000 || o.Lots < 1 || o.Lots > 10_000 || o.Duration <= 0 || o.Clients < 1 || o.Allocators < 0 || o.Rounds < 1 || o.rate <= 0 {
		return cli.Usagef("--skus 1..1000, --lots 1..10000, --duration > 0, --clients >= 1, --allocators >= 0, --rounds >= 1, --rate > 0")
	}
	cfg, err := config.Load[e2ebench.Config]()
	if err != nil {
		return err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	opt := o.Options
	opt.Prefix = cfg.KeyPrefix + ":benchapi:" + randomID()
	var rep apibench.Report
	if o.fleet {
		rep, err = e2ebench.RunAPI(ctx, cfg, rc, opt, o.rate, o.binDir)
	} else {
		db, oerr := cfg.Postgres.OpenPool(2)
		if oerr != nil {
			return oerr
		}
		if sqlDB, err := db.DB(); err == nil {
			defer sqlDB.Close()
		}
		rep, err = apibench.Run(ctx, rc, db, opt, os.Stderr)
	}
	if err != nil {
		return err
	}
	if o.asJSON {
		return cli.WriteJSON(w, rep)
	}
	printBenchAPI(w, rep, opt)
	return nil
}

func printBenchAPI(w io.Writer, rep apibench.Report, opt apibench.Options) {
	writes := fmt.Sprintf("%d in-process allocators (%d allocations meanwhile)", rep.Allocators, rep.Writes)
	if rep.Fleet {
		writes = fmt.Sprintf("an order-worker allocating (%d order events sent meanwhile)", rep.Writes)
	}
	fmt.Fprintf(w, "bench api: %d SKUs of %d lots, %d clients, %s, %s per variant in %d rounds (medians)\n",
		rep.SKUs, rep.Lots, rep.Clients, writes, opt.Duration, opt.Rounds)
	fmt.Fprintf(w, "  ledger operations on the SKUs read, meanwhile: %d\n", rep.VersionsAdvanced)
	fmt.Fprintf(w, "  availability (API)       %9.0f reads/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.Availability.OpsPerSec, rep.Availability.P50Ms, rep.Availability.P99Ms)
	fmt.Fprintf(w, "  bare GET, %5d bytes    %9.0f reads/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.ResponseBytes, rep.BareGet.OpsPerSec, rep.BareGet.P50Ms, rep.BareGet.P99Ms)
	fmt.Fprintf(w, "  availability / bare GET  %9.2fx (target 0.5x)\n", rep.Ratio)
	fmt.Fprintf(w, "  cart of %d SKUs          %9.0f carts/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.SKUs, rep.Cart.OpsPerSec, rep.Cart.P50Ms, rep.Cart.P99Ms)
	fmt.Fprintf(w, "  %d single calls          %9.0f sets/s   p50 %6.2f ms  p99 %6.2f ms  (cart %.1fx faster)\n", rep.SKUs, rep.Singles.OpsPerSec, rep.Singles.P50Ms, rep.Singles.P99Ms, rep.Cart.OpsPerSec/rep.Singles.OpsPerSec)
}
