package main

import (
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/tools/expirybench"
)

func benchExpiryCmd() *cobra.Command {
	o := expirybench.Options{Workers: 2}
	c := &cobra.Command{
		Use:   "expiry",
		Short: "benchmark how soon thousands of holds ending at one instant are expired",
		Long: "expiry places --holds reserve orders whose holds end at one instant (--lead after the first\n" +
			"placement) while a background workload runs at --rate (the demo's), and reports the delay\n" +
			"from that instant to each release committed in PostgreSQL (p50, p99, max), beside the\n" +
			"background's own send -> commit latency in turn. It fails when a hold did not expire within --wait.",
		Args: cli.NoArgs,
		RunE: benchRunE(&o, func(o expirybench.Options) error {
			if o.Holds < 1 || o.Rate < 0 || o.Lead <= 0 || o.Wait <= 0 || o.Workers < 1 {
				return cli.Usagef("--holds, --lead, --wait and --workers must be positive, --rate not negative")
			}
			return nil
		}, expirybench.Run),
	}
	fs := c.Flags()
	fs.IntVar(&o.Holds, "holds", expirybench.HoldsDefault, "reserve orders whose holds end at one instant")
	fs.Float64Var(&o.Rate, "rate", expirybench.RateDefault, "events/s of the background workload (0: none)")
	fs.DurationVar(&o.Lead, "lead", expirybench.LeadDefault, "time from the first placement to the holds' end")
	fs.DurationVar(&o.Wait, "wait", expirybench.WaitDefault, "how long to wait for the expiries after the holds' end")
	fs.IntVar(&o.Workers, "workers", o.Workers, "order-worker replicas")
	fleetFlags(fs, &o.BinDir, &o.JSON)
	return c
}
