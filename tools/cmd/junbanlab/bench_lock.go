package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/tools/lockbench"
)

// benchLockOptions are the flags of bench lock.
type benchLockOptions struct {
	duration   time.Duration
	asJSON     bool
	detached   int
	cpuProfile string
}

func benchLockCmd() *cobra.Command {
	var o benchLockOptions
	c := &cobra.Command{
		Use:   "lock",
		Short: "benchmark the per-order turn against redsync",
		Long:  "lock measures the per-order turn (lockhandoff) against redsync: see docs/performance.md.",
		Args:  cli.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return runBenchLock(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.DurationVar(&o.duration, "duration", lockbench.DurationDefault, "length of each of the measurements (the drain-alone one queues duration x 4,000 events)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of a table")
	fs.IntVar(&o.detached, "detached", 128, "turns that may go on in the background after their Submit returned (lockhandoff.Config.Detached; 128 is the order-worker's JUNBAN_DETACHED_TURNS default)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the bench process's CPU profile to this file, each sample labelled with its measurement (go tool pprof -tagfocus measurement=hot)")
	return c
}

// runBenchLock measures the per-order turn against redsync: see docs/performance.md.
func runBenchLock(ctx context.Context, w io.Writer, o benchLockOptions) error {
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
	if o.detached < 0 {
		return cli.Usagef("--detached %d is negative", o.detached)
	}
	// Both contenders run in this process, under the GC target the order-worker runs
	// lockhandoff with.
	gc := config.TuneGC()
	if !o.asJSON {
		fmt.Fprintf(os.Stderr, "bench lock: GC target %d (the order-worker's; GOGC overrides)\n", gc)
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	bo := lockbench.Options{Duration: o.duration, Detached: o.detached, Prefix: cfg.KeyPrefix + ":bench-lock-" + rand.Text()[:10]}
	if !o.asJSON {
		bo.Progress = w
		fmt.Fprintf(w, "bench lock: %d producers, %v per measurement, redis %s\n", lockbench.ProducersDefault, o.duration, cfg.URL)
	}
	res, _, err := lockbench.Run(ctx, rc, bo)
	if err != nil {
		return err
	}
	if o.asJSON {
		return json.NewEncoder(w).Encode(res)
	}
	printBenchLock(w, res)
	return nil
}

func printBenchLock(w io.Writer, res lockbench.Result) {
	h, s := res.Hot, res.Spread
	fmt.Fprintf(w, "\nhot:    handoff/redsync-1ms eps %.2fx (target >= 2), p99 %.3f of redsync-1ms (target <= 0.2),\n"+
		"        fairness %.3f (target >= 0.95), max %.3f of redsync-default (target <= 0.1)\n",
		h.HandoffEPS/h.RedsyncTunedEPS, h.HandoffP99Ms/h.RedsyncTunedP99Ms, h.HandoffFairness, h.HandoffMaxMs/h.RedsyncDefaultMaxMs)
	fmt.Fprintf(w, "        the handler making its write itself, a round trip before the handoff's (not a returned Trim): eps %.2fx, p99 %.3f\n",
		h.HandoffOwnWriteEPS/h.RedsyncTunedEPS, h.HandoffOwnWriteP99Ms/h.RedsyncTunedP99Ms)
	fmt.Fprintf(w, "        the drain loop alone (a wait list filled in advance, no producers; about the ceiling of handoff here): %.2fx\n",
		h.HandoffDrainEPS/h.RedsyncTunedEPS)
	fmt.Fprintf(w, "spread: handoff/unlocked eps %.2fx (target >= 0.4)\n", s.HandoffEPS/s.UnlockedEPS)
	fmt.Fprintf(w, "        every turn drained inline (Submit returns after the release; --detached 0): %.2fx\n", s.HandoffInlineEPS/s.UnlockedEPS)
}
