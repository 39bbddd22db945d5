package main

import (
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/tools/queuebench"
)

func benchQueueCmd() *cobra.Command {
	o := queuebench.Options{Lines: queuebench.LinesDefault, Rounds: queuebench.RoundsDefault}
	c := &cobra.Command{
		Use:   "queue",
		Short: "benchmark how fast a receipt fills thousands of waiting lines",
		Long: "queue backorders --lines one-unit lines of one SKU, then brings the units they wait for in one\n" +
			"adjustment and goes on filling while a result says more lines may be filled, as a SKU's step\n" +
			"does; it reports the lines filled per second and each line's delay from the receipt's start\n" +
			"to its fill (p50, p99, max), over --rounds receipts.",
		Args: cli.NoArgs,
		RunE: benchRunE(&o, func(o queuebench.Options) error {
			if o.Lines < 1 || o.Rounds < 1 {
				return cli.Usagef("--lines and --rounds must be positive")
			}
			return nil
		}, queuebench.Run),
	}
	fs := c.Flags()
	fs.IntVar(&o.Lines, "lines", o.Lines, "waiting lines, one unit each")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "receipts measured, each against a fresh queue")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object")
	return c
}
