package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
)

// movedCmds are the commands that went to junbanlab with the tooling they run: hidden,
// each a usage error that names its new command line, so that a script that still calls
// junbanctl learns where it went instead of finding an unknown command.
func movedCmds() []*cobra.Command {
	var cs []*cobra.Command
	for _, name := range []string{"bench", "chaos", "loadgen"} {
		cs = append(cs, &cobra.Command{
			Use: name, Hidden: true, DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error {
				return cli.Usagef("%s moved to junbanlab (tools/cmd/junbanlab, bin/junbanlab after make build): junbanlab %s",
					name, strings.Join(append([]string{name}, args...), " "))
			},
		})
	}
	return cs
}
