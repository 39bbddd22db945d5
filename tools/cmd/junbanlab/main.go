// Command junbanlab is junban's lab: load generation, benchmarks and chaos against a
// junban stack. It is a binary of its own so that the services and junbanctl, which an
// operator runs in production, link none of the tooling under tools/.
//
// Exit status: 0 on success (and for --help, -h and help), 1 when the command failed (a
// benchmark that could not run, a load or chaos run whose check found a problem), 2 for a
// mistake in the command line, with the usage on standard error (internal/platform/cli).
package main

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
)

func main() {
	cli.Main(newRootCmd())
}

func newRootCmd() *cobra.Command {
	return cli.NewRoot("junbanlab", "junban's lab: load generation, benchmarks and chaos against a junban stack",
		"junbanlab is junban's lab: load generation, benchmarks and chaos against a junban stack\n"+
			"(docs/performance.md). The operator's commands are junbanctl's.\n\n"+
			"Every command reads its settings from the environment, as the services do (README.md,\n"+
			"\"Configuration\"). Exit status: 0 success, 1 failure, 2 a mistake in the command line.",
		loadgenCmd(),
		cli.Group("bench", "benchmarks (docs/performance.md)", benchLockCmd(), benchAllocCmd(), benchAPICmd(), benchE2ECmd(), benchExpiryCmd(), benchPersistCmd(), benchCostCmd(), benchQueueCmd()),
		chaosCmd(),
		cli.Group("outbound", "check what a consumer of the outbound topic received", outboundCheckCmd()),
	)
}

// randomID names a benchmark's keys apart from another run's.
func randomID() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}
