package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/tools/costbench"
)

func benchCostCmd() *cobra.Command {
	o := costbench.Defaults()
	c := &cobra.Command{
		Use:   "cost",
		Short: "measure what one event costs: CPU, Redis, SQS requests and PostgreSQL per event",
		Long: "cost runs a demo-shaped load (the demo's workload without its webhooks) at a fixed rate\n" +
			"through order-workers and a persist-worker at JUNBAN_SQS_WAIT_SECONDS=1 and prints, per\n" +
			"distinct event: each process's CPU (process_cpu_seconds_total), Redis's CPU (INFO cpu) and\n" +
			"commands (INFO commandstats, EVALSHA apart), the SQS requests by queue and action with the\n" +
			"messages each carried (junban_sqs_requests_total and junban_sqs_messages_total of the\n" +
			"processes), PostgreSQL's transactions and rows written (pg_stat_database of the database),\n" +
			"and the in-turn send -> commit latency, each beside issue 34's baseline and target. Then,\n" +
			"for --idle, a fresh fleet idle at JUNBAN_SQS_WAIT_SECONDS=20: its SQS requests a minute.\n" +
			"With --runs N, N runs one after the other, then each headline figure's median, range and\n" +
			"the runs that met its target. With --baseline-bin DIR, each run also runs DIR's\n" +
			"order-worker and persist-worker (issue 34's baseline tree: make bench-cost-baseline builds\n" +
			"it) on the same load, and the summary gives each figure as a ratio to theirs, beside the\n" +
			"issue's target as a ratio. Redis and PostgreSQL figures are the whole server's: run it on\n" +
			"a stack nothing else uses.",
		Args: cli.NoArgs,
		RunE: benchRunE(&o, func(o costbench.Options) error {
			if o.Rate <= 0 || o.Orders < 1 || o.SKUs < 1 || o.Workers < 1 || o.Runs < 1 || o.Idle < 0 || o.Wait <= 0 {
				return cli.Usagef("-rate, -orders, -skus, -workers, -runs and -wait must be positive, -idle not negative")
			}
			if o.BaselineBin != "" {
				for _, bin := range []string{"order-worker", "persist-worker"} {
					if _, err := os.Stat(filepath.Join(o.BaselineBin, bin)); err != nil {
						return cli.Usagef("-baseline-bin: no %s in %s (make bench-cost-baseline builds the baseline's)", bin, o.BaselineBin)
					}
				}
			}
			return nil
		}, costbench.Run),
	}
	fs := c.Flags()
	fs.Float64Var(&o.Rate, "rate", o.Rate, "events/s offered (duplicates included)")
	fs.IntVar(&o.Orders, "orders", o.Orders, "orders in the workload")
	fs.IntVar(&o.SKUs, "skus", o.SKUs, "SKUs in the workload")
	fs.IntVar(&o.Workers, "workers", o.Workers, "order-worker replicas")
	fs.DurationVar(&o.Idle, "idle", o.Idle, "how long the idle fleet runs at JUNBAN_SQS_WAIT_SECONDS=20 after the load (0: not at all)")
	fs.DurationVar(&o.Wait, "wait", o.Wait, "how long to wait for every result to be persisted")
	fs.IntVar(&o.Runs, "runs", o.Runs, "how many runs, one after the other; beyond one, each headline figure's median, range and the runs that met its target follow")
	fs.StringVar(&o.BaselineBin, "baseline-bin", "", "directory of the baseline tree's order-worker and persist-worker: each run runs them too, and the summary gives ratios to them")
	fleetFlags(fs, &o.BinDir, &o.JSON)
	fs.StringVar(&o.Profile, "profile", "", "directory for a CPU profile of each process under load (JUNBAN_PPROF=true: profile and measure in separate runs)")
	fs.DurationVar(&o.ProfileFor, "profile-for", 20*time.Second, "how long each CPU profile runs from the first send")
	return c
}
