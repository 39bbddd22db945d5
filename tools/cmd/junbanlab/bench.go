package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/junban/junban/internal/platform/config"
)

// benchRunE is the RunE of a benchmark that its package runs whole, from the settings it
// reads from the environment (C) and its options (*o, as the flags left them): check
// refuses options that make no sense with a usage error, before anything is loaded.
func benchRunE[C, O any](o *O, check func(O) error, run func(context.Context, C, O, io.Writer) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, _ []string) error {
		if err := check(*o); err != nil {
			return err
		}
		cfg, err := config.Load[C]()
		if err != nil {
			return err
		}
		return run(c.Context(), cfg, *o, c.OutOrStdout())
	}
}

// fleetFlags adds the flags of the benchmarks that start a fleet of junban's binaries:
// where the binaries are, and --json.
func fleetFlags(fs *pflag.FlagSet, binDir *string, asJSON *bool) {
	fs.StringVar(binDir, "bin", "", "directory of the binaries (default: beside junbanlab)")
	fs.BoolVar(asJSON, "json", false, "print one JSON object")
}
