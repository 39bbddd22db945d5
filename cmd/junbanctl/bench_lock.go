package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/lockhandoff/bench"
)

// runBenchLock measures the per-order turn against redsync: see docs/benchmarks.md.
func runBenchLock(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench lock", flag.ContinueOnError)
	duration := fs.Duration("duration", bench.DurationDefault, "length of each of the measurements (the drain-alone one queues duration x 4,000 events)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	pipelines := fs.Int("pipelines", lockhandoff.PipelinesDefault, "round trips of lockhandoff's own scripts in flight at once (lockhandoff.Config.Pipelines)")
	detached := fs.Int("detached", 128, "turns that may go on in the background after their Submit returned (lockhandoff.Config.Detached; 128 is the order-worker's JUNBAN_DETACHED_TURNS default)")
	cpuProfile := fs.String("cpuprofile", "", "write the bench process's CPU profile to this file, each sample labelled with its measurement (go tool pprof -tagfocus measurement=hot)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	cfg, err := config.Load[config.Redis]()
	if err != nil {
		return err
	}
	rc, err := cfg.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", cfg.URL, err)
	}
	if *pipelines < 1 {
		return fmt.Errorf("%w: --pipelines %d is below 1", errUsage, *pipelines)
	}
	if *detached < 0 {
		return fmt.Errorf("%w: --detached %d is negative", errUsage, *detached)
	}
	// Both contenders run in this process, under the GC target the order-worker runs
	// lockhandoff with.
	gc := config.TuneGC()
	if !*asJSON {
		fmt.Fprintf(os.Stderr, "bench lock: GC target %d (the order-worker's; GOGC overrides)\n", gc)
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	o := bench.Options{Duration: *duration, Pipelines: *pipelines, Detached: *detached, Prefix: cfg.KeyPrefix + ":bench-lock-" + rand.Text()[:10]}
	if !*asJSON {
		o.Progress = os.Stdout
		fmt.Printf("bench lock: %d producers, %v per measurement, redis %s\n", bench.ProducersDefault, *duration, cfg.URL)
	}
	res, _, err := bench.Run(ctx, rc, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	h, s := res.Hot, res.Spread
	fmt.Printf("\nhot:    handoff/redsync-1ms eps %.2fx (target >= 2), p99 %.3f of redsync-1ms (target <= 0.2),\n"+
		"        fairness %.3f (target >= 0.95), max %.3f of redsync-default (target <= 0.1)\n",
		h.HandoffEPS/h.RedsyncTunedEPS, h.HandoffP99Ms/h.RedsyncTunedP99Ms, h.HandoffFairness, h.HandoffMaxMs/h.RedsyncDefaultMaxMs)
	fmt.Printf("        the handler making its write itself, a round trip before the handoff's (not Commit): eps %.2fx, p99 %.3f\n",
		h.HandoffOwnWriteEPS/h.RedsyncTunedEPS, h.HandoffOwnWriteP99Ms/h.RedsyncTunedP99Ms)
	fmt.Printf("        the drain loop alone (a wait list filled in advance, no producers; about the ceiling of handoff here): %.2fx\n",
		h.HandoffDrainEPS/h.RedsyncTunedEPS)
	fmt.Printf("spread: handoff/unlocked eps %.2fx (target >= 0.4)\n", s.HandoffEPS/s.UnlockedEPS)
	fmt.Printf("        every turn drained inline (Submit returns after the release; --detached 0): %.2fx\n", s.HandoffInlineEPS/s.UnlockedEPS)
	return nil
}
