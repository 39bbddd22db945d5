package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/tools/persistbench"
)

func benchPersistCmd() *cobra.Command {
	var o persistbench.Options
	var cpuProfile string
	c := &cobra.Command{
		Use:   "persist",
		Short: "benchmark batched persistence against one result per transaction",
		Long: "persist measures results applied per second through the SQS emulator into PostgreSQL, batched\n" +
			"(one transaction per batch) against one result per transaction, then PostgreSQL alone and the\n" +
			"queue path alone, to show where the limit is.",
		Args: cli.NoArgs,
		RunE: benchRunE(&o, func(o persistbench.Options) error {
			if o.Duration <= 0 || o.BatchMax < 1 || o.Concurrency < 1 || o.Receivers < 1 || o.Appliers < 1 || o.Backlog < 10 || o.Window < 0 || o.Parts < 0 {
				return cli.Usagef("--duration, --batch, --receivers, --concurrency and --appliers must be positive, --backlog at least 10")
			}
			return nil
		}, func(ctx context.Context, cfg persistbench.Config, o persistbench.Options, w io.Writer) error {
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			return persistbench.Run(ctx, cfg, o, w)
		}),
	}
	fs := c.Flags()
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long each mode runs")
	fs.BoolVar(&o.JSON, "json", false, `print {"batched_eps":..,"single_eps":..,...} only`)
	fs.IntVar(&o.BatchMax, "batch", 100, "most results per batch (the persist-worker's JUNBAN_PERSIST_BATCH_MAX)")
	fs.DurationVar(&o.Window, "window", 100*time.Millisecond, "how long a batch collects after its first message (JUNBAN_PERSIST_BATCH_WINDOW)")
	fs.IntVar(&o.Receivers, "receivers", 16, "receives in flight, filling one batch at a time, in both modes (JUNBAN_PERSIST_RECEIVERS)")
	fs.IntVar(&o.Concurrency, "concurrency", 1, "batches handed to the handler at once per receiver, in both modes (JUNBAN_PERSIST_CONCURRENCY)")
	fs.IntVar(&o.Appliers, "appliers", 4, "PostgreSQL transactions at once (connections), in both modes (JUNBAN_PERSIST_APPLIERS)")
	fs.IntVar(&o.Backlog, "backlog", 2000, "results kept waiting in the queue: a producer tops the queue up to this as the consumers drain it")
	fs.DurationVar(&o.PGLatency, "pg-latency", 0, "added round-trip time between the bench and PostgreSQL (a loopback proxy), e.g. 500us for a database across the network; 0: none")
	fs.DurationVar(&o.Parts, "parts", 5*time.Second, "how long each part measurement runs (PostgreSQL alone batched and single, the queue path alone); 0: skip them")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write the bench process's CPU profile to this file, each sample labelled with its mode (go tool pprof -tagfocus mode=batched)")
	return c
}
