package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger/allocbench"
)

// runBenchAlloc measures junban's allocation script against the script before the
// warehouse operations, a JSON-document script, PostgreSQL with SELECT ... FOR UPDATE and
// a trivial EVALSHA, on one hot SKU, and times RegisterLot beside an allocation.
func runBenchAlloc(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench alloc", flag.ContinueOnError)
	lots := fs.Int("lots", allocbench.LotsDefault, "lots of the hot SKU")
	dur := fs.Duration("duration", allocbench.DurationDefault, "total duration of each variant, split over --rounds turns")
	rounds := fs.Int("rounds", allocbench.RoundsDefault, "turns per variant (figures are medians over them)")
	clients := fs.Int("clients", allocbench.ClientsDefault, "concurrent clients of every variant")
	sweep := fs.Bool("sweep", true, "also measure junban at 1, 10, 100 and 1000 lots (usual and worst case)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	pgConns := fs.Int("pg-conns", 0, "PostgreSQL connections of the row-lock variant (default: --clients)")
	registration := fs.Bool("registration", true, "also time RegisterLot beside an allocation on SKUs of 100 and 1,000 lots")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *lots < 1 || *lots > 100_000 || *clients < 1 || *dur <= 0 || *rounds < 1 {
		return fmt.Errorf("%w: --lots 1..100000, --clients >= 1, --duration > 0, --rounds >= 1", errUsage)
	}
	rcfg, err := config.Load[config.Redis]()
	if err != nil {
		return err
	}
	pcfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	var rc redis.UniversalClient
	if rcfg.Cluster {
		opt, err := redis.ParseClusterURL(rcfg.URL)
		if err != nil {
			return err
		}
		opt.PoolSize = *clients + 4
		rc = redis.NewClusterClient(opt)
	} else {
		opt, err := redis.ParseURL(rcfg.URL)
		if err != nil {
			return err
		}
		opt.PoolSize = *clients + 4
		rc = redis.NewClient(opt)
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
	var log io.Writer = os.Stderr
	opt := allocbench.Options{Lots: *lots, Duration: *dur, Clients: *clients, Sweep: *sweep, Rounds: *rounds, PGConns: *pgConns,
		Registration: *registration, Prefix: rcfg.KeyPrefix + ":benchalloc:" + randomID()}
	rep, err := allocbench.Run(ctx, rc, db, opt, log)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Printf("bench alloc: %d lots, %d clients, %s per variant in %d rounds (medians)\n", rep.Lots, rep.Clients, *dur, *rounds)
	fmt.Printf("  junban            %10.0f ops/s  (%.2fx of the ceiling, %.2fx of junban_before)\n", rep.Junban, rep.Ratios.JunbanOfCeiling, rep.Ratios.JunbanOfBefore)
	fmt.Printf("  junban_holder     %10.0f ops/s  (%.2fx of the ceiling, %.2fx of junban_before)\n", rep.JunbanHolder, rep.Ratios.HolderOfCeiling, rep.Ratios.HolderOfBefore)
	fmt.Printf("  junban_before     %10.0f ops/s  (%.2fx of the ceiling; the script of 5f6d35e)\n", rep.JunbanBefore, rep.Ratios.BeforeOfCeiling)
	fmt.Printf("  jsondoc           %10.0f ops/s  (junban %.1fx)\n", rep.JSONDoc, rep.Junban/rep.JSONDoc)
	fmt.Printf("  pg_rowlock        %10.0f ops/s  (junban %.1fx)\n", rep.PGRowLock, rep.Junban/rep.PGRowLock)
	fmt.Printf("  evalsha_ceiling   %10.0f ops/s  (junban %.2fx of it)\n", rep.EvalshaCeiling, rep.Junban/rep.EvalshaCeiling)
	for _, n := range []string{"1", "10", "100", "1000"} {
		if r, ok := rep.JunbanByLots[n]; ok {
			fmt.Printf("  junban %4s lots   %10.0f ops/s  worst case (every lot read) %10.0f ops/s\n", n, r, rep.JunbanWorstByLots[n])
		}
	}
	for _, r := range rep.Registration {
		fmt.Printf("  %4d lots (up to %d)  RegisterLot %8.0f ops/s %7.1f usec/call   Allocate+holder %8.0f ops/s %7.1f usec/call\n",
			r.Lots, r.MaxLotsDuringRun, r.RegisterOps, r.RegisterUsecPerCall, r.AllocateOps, r.AllocateUsecPerCall)
	}
	names := make([]string, 0, len(rep.Profile))
	for name := range rep.Profile {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Println("  Redis's own account per call (INFO commandstats): time inside EVALSHA; commands the script ran")
	for _, name := range names {
		p := rep.Profile[name]
		var calls []string
		for c, n := range p.InnerCallsPerOp {
			calls = append(calls, fmt.Sprintf("%s x%g", c, n))
		}
		sort.Strings(calls)
		fmt.Printf("  %-24s %8.1f usec  %s (%.1f usec of them)\n", name, p.ScriptUsecPerCall, strings.Join(calls, ", "), p.InnerUsecPerOp)
	}
	return nil
}

func randomID() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}
