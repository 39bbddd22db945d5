// Command junbanctl is junban's admin and developer CLI: migrations, inventory import,
// sending events, reconcile, the dead-letter queues and the local stack. Benchmarks, load
// generation and chaos runs are junbanlab's (tools/cmd/junbanlab), so that the CLI an
// operator runs links none of them.
//
// Exit status: 0 on success (and for --help, -h and help), 1 when the command failed,
// 2 for a mistake in the command line (unknown command or flag, a missing or extra
// argument, a flag value out of range), with the usage on standard error (internal/platform/cli).
package main

import (
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
)

func main() {
	cli.Main(newRootCmd())
}

func newRootCmd() *cobra.Command {
	root := cli.NewRoot("junbanctl", "junban's admin and developer CLI",
		"junbanctl is junban's admin and developer CLI: migrations, inventory import, sending events,\n"+
			"reconcile, the dead-letter queues and the local stack (benchmarks, load and chaos: junbanlab).\n\n"+
			"Every command reads its settings from the environment, as the services do (README.md,\n"+
			"\"Configuration\"). Exit status: 0 success, 1 failure, 2 a mistake in the command line.",
		migrateCmd(), stackCmd(), sendCmd(),
		cli.Group("dlq", "list and redrive the dead-letter queues", dlqListCmd(), dlqRedriveCmd()),
		cli.Group("inventory", "import SKUs and lots", inventoryImportCmd()),
		cli.Group("turn", "inspect and unstick an order's turn", turnShowCmd(), turnSkipCmd()),
		stockCmd(), queueCmd(), orderCmd(), reconcileCmd(),
		cli.Group("holds", "the reservations that expire", holdsReindexCmd()),
		cli.Group("skus", "a SKU's settings in PostgreSQL", skusThresholdCmd()),
		ledgerCmd(), locationsCmd(),
		cli.Group("queues", "create the queues", queuesCreateCmd()),
		cli.Group("topics", "create SNS topics and subscribe queues to them", topicsCreateCmd(), topicsSubscribeCmd()),
		cli.Group("webhook", "send signed webhooks to a running gateway", webhookSendCmd(), webhookStormCmd()),
	)
	root.AddCommand(movedCmds()...)
	return root
}
