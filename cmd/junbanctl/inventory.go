package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// inventoryReport is what inventory import prints with --json.
type inventoryReport struct {
	// File is the file read.
	File string `json:"file"`
	// DryRun is true when the file was only validated.
	DryRun bool `json:"dry_run"`
	// SKUs and Lots count the SKU rows and lot rows: valid ones with --dry-run, written ones
	// without.
	SKUs int `json:"skus"`
	Lots int `json:"lots"`
}

func inventoryImportCmd() *cobra.Command {
	var dryRun, asJSON bool
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "import SKUs and lots from a CSV or JSON-lines file",
		Long: fmt.Sprintf(`import reads SKUs and lots from a CSV (with a header) or JSON-lines file, validates every
line and upserts them into PostgreSQL in one transaction.

FILE is CSV with a header, or JSON lines (one object per line). Columns / keys:
  %v
A row without lot_id is a SKU row (safety_stock: the SKU's network-wide one, or with a
location other than the default that location's own); a row with lot_id is a lot row.
Defaults: good=true, valid_from=%s, valid_to=%s, buckets 0, reg_seq next free.
Every problem is reported with its line and field; nothing is written unless all lines are valid.
SKUs that are live (loaded into Redis under JUNBAN_KEY_PREFIX, or with operations persisted)
are refused with nothing written: Redis is their source of truth, and their stock changes
through inventory.received and inventory.adjusted events.`, inventorydb.ImportColumns, stock.MinDate, stock.MaxDate),
		Args: cli.OneArg("FILE"),
		RunE: func(c *cobra.Command, args []string) error {
			return runInventoryImport(c.Context(), c.OutOrStdout(), args[0], dryRun, asJSON)
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "validate the file only")
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// runInventoryImport validates every line of file and, unless dryRun, upserts its SKUs and
// lots into PostgreSQL in one transaction.
func runInventoryImport(ctx context.Context, w io.Writer, file string, dryRun, asJSON bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	skus, err := inventorydb.ParseImport(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	rep := inventoryReport{File: file, DryRun: dryRun, SKUs: len(skus)}
	for _, s := range skus {
		rep.Lots += len(s.Lots)
	}
	if !dryRun {
		st, err := writeImport(ctx, skus)
		if err != nil {
			return err
		}
		rep.SKUs, rep.Lots = st.SKUs, st.Lots
	}
	switch {
	case asJSON:
		return cli.WriteJSON(w, rep)
	case dryRun:
		fmt.Fprintf(w, "inventory import: %s is valid: %d SKU(s), %d lot(s)\n", file, rep.SKUs, rep.Lots)
	default:
		fmt.Fprintf(w, "inventory import: %d SKU(s), %d lot(s) written\n", rep.SKUs, rep.Lots)
	}
	return nil
}

// writeImport writes skus to the PostgreSQL of the environment, refusing SKUs loaded in its Redis.
func writeImport(ctx context.Context, skus []inventorydb.ImportSKU) (inventorydb.ImportStats, error) {
	st, err := openStores(0)
	if err != nil {
		return inventorydb.ImportStats{}, err
	}
	defer st.close()
	return inventorydb.WriteImport(ctx, st.db, skus, inventorydb.Loaded(st.rc, st.prefix))
}
