package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
)

// ledgerCmd groups the commands that maintain the ledger's data in Redis.
func ledgerCmd() *cobra.Command {
	return cli.Group("ledger", "maintain the ledger's data in Redis", ledgerReindexCmd())
}

// ledgerReindexOptions are the flags of ledger reindex.
type ledgerReindexOptions struct {
	dryRun, asJSON bool
	skus           []string
}

func ledgerReindexCmd() *cobra.Command {
	var o ledgerReindexOptions
	c := &cobra.Command{
		Use:   "reindex",
		Short: "rewrite the SKUs' candidate indexes in this version's key layout",
		Long: "reindex rewrites the candidate index, the lots' stored keys and the layout stamp of every SKU in\n" +
			"Redis (or of the --sku ones) that differs from what this version's key layout gives: one SKU at a\n" +
			"time, each in one atomic script that keeps what operations do meanwhile, so it may run beside live\n" +
			"traffic. Running it again changes nothing; --dry-run counts what would change and writes nothing.\n" +
			"docs/ledger.md, \"The key's layout changed: re-index\".",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runLedgerReindex(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.BoolVar(&o.dryRun, "dry-run", false, "count the SKUs that differ from the current layout; write nothing")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.StringArrayVar(&o.skus, "sku", nil, "only this SKU (repeat for more); default: every SKU in Redis")
	return c
}

// runLedgerReindex re-indexes the SKUs (ledger.ReindexAll) and prints what it found.
func runLedgerReindex(ctx context.Context, w io.Writer, o ledgerReindexOptions) error {
	cfg, err := config.Load[config.Redis]()
	if err != nil {
		return err
	}
	rc, err := cfg.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	// No loader: a SKU that Redis does not hold has no index to rewrite.
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: cfg.KeyPrefix})
	if err != nil {
		return err
	}
	rep, err := led.ReindexAll(ctx, o.skus, o.dryRun)
	if err != nil {
		return fmt.Errorf("after %d SKUs (%d rewritten): %w", rep.SKUs, rep.Rewritten, err)
	}
	if o.asJSON {
		return cli.WriteJSON(w, rep)
	}
	dry := ""
	if o.dryRun {
		dry = " (dry run)"
	}
	fmt.Fprintf(w, "ledger reindex%s: %d SKUs under prefix %q, key layout %s\n", dry, rep.SKUs, cfg.KeyPrefix, rep.KeyLayout)
	fmt.Fprintf(w, "  %d in another layout (stamp %d, index records %d, stored keys of %d lots)", rep.Stale, rep.Layout, rep.Index, rep.Keys)
	if o.dryRun {
		fmt.Fprintln(w, ": would be rewritten")
	} else {
		fmt.Fprintf(w, ": %d rewritten\n", rep.Rewritten)
	}
	fmt.Fprintf(w, "  %d in the current layout, %d not in Redis\n", rep.SKUs-rep.Stale-rep.Absent, rep.Absent)
	return nil
}
