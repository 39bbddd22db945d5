package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/junban/junban/internal/api/apibench"
	"github.com/junban/junban/internal/config"
)

// runBenchAPI measures availability reads through junban-api's handler against a bare
// Redis GET of an answer-sized value through the same HTTP server, while allocators work
// on the same SKUs, and a cart of every SKU against as many single calls.
func runBenchAPI(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench api", flag.ContinueOnError)
	skus := fs.Int("skus", apibench.SKUsDefault, "SKUs read, and the cart's size")
	lots := fs.Int("lots", apibench.LotsDefault, "lots per SKU")
	dur := fs.Duration("duration", apibench.DurationDefault, "measured time of each variant per round")
	clients := fs.Int("clients", apibench.ClientsDefault, "concurrent HTTP clients")
	allocators := fs.Int("allocators", apibench.AllocatorsDefault, "concurrent allocate+release loops on the same SKUs (0: none)")
	rounds := fs.Int("rounds", apibench.RoundsDefault, "rounds; the variants alternate, figures are medians")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *skus < 1 || *skus > 1000 || *lots < 1 || *lots > 10_000 || *dur <= 0 || *clients < 1 || *allocators < 0 || *rounds < 1 {
		return fmt.Errorf("%w: --skus 1..1000, --lots 1..10000, --duration > 0, --clients >= 1, --allocators >= 0, --rounds >= 1", errUsage)
	}
	rcfg, err := config.Load[config.Redis]()
	if err != nil {
		return err
	}
	pcfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	rc, err := rcfg.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	db, err := pcfg.OpenPool(2)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	rep, err := apibench.Run(ctx, rc, db, apibench.Options{SKUs: *skus, Lots: *lots, Duration: *dur, Clients: *clients,
		Allocators: *allocators, Rounds: *rounds, Prefix: rcfg.KeyPrefix + ":benchapi:" + randomID()}, os.Stderr)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Printf("bench api: %d SKUs of %d lots, %d clients, %d allocators (%d allocations meanwhile), %s per variant in %d rounds (medians)\n",
		rep.SKUs, rep.Lots, rep.Clients, rep.Allocators, rep.Allocations, *dur, *rounds)
	fmt.Printf("  availability (API)       %9.0f reads/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.Availability.OpsPerSec, rep.Availability.P50Ms, rep.Availability.P99Ms)
	fmt.Printf("  bare GET, %5d bytes    %9.0f reads/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.ResponseBytes, rep.BareGet.OpsPerSec, rep.BareGet.P50Ms, rep.BareGet.P99Ms)
	fmt.Printf("  availability / bare GET  %9.2fx (target 0.5x)\n", rep.Ratio)
	fmt.Printf("  cart of %d SKUs          %9.0f carts/s  p50 %6.2f ms  p99 %6.2f ms\n", rep.SKUs, rep.Cart.OpsPerSec, rep.Cart.P50Ms, rep.Cart.P99Ms)
	fmt.Printf("  %d single calls          %9.0f sets/s   p50 %6.2f ms  p99 %6.2f ms  (cart %.1fx faster)\n", rep.SKUs, rep.Singles.OpsPerSec, rep.Singles.P50Ms, rep.Singles.P99Ms, rep.Cart.OpsPerSec/rep.Singles.OpsPerSec)
	return nil
}
