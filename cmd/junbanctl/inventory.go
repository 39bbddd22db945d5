package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger"
)

// runInventoryImport reads SKUs and lots from a CSV (with a header) or JSON-lines file,
// validates every line and upserts them into PostgreSQL in one transaction.
func runInventoryImport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("inventory import", flag.ContinueOnError)
	dryRun := fs.Bool("dry-run", false, "validate the file only")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: junbanctl inventory import [--dry-run] FILE

FILE is CSV with a header, or JSON lines (one object per line). Columns / keys:
  %v
A row without lot_id is a SKU row (safety_stock); a row with lot_id is a lot row.
Defaults: good=true, valid_from=%s, valid_to=%s, buckets 0, reg_seq next free.
Every problem is reported with its line and field; nothing is written unless all lines are valid.
SKUs already loaded into Redis keep their Redis state (Redis is the source of truth once loaded).
`, ledger.ImportColumns, ledger.MinDate, ledger.MaxDate)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: junbanctl inventory import FILE", errUsage)
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	skus, err := ledger.ParseImport(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	lots := 0
	for _, s := range skus {
		lots += len(s.Lots)
	}
	if *dryRun {
		fmt.Printf("inventory import: %s is valid: %d SKU(s), %d lot(s)\n", fs.Arg(0), len(skus), lots)
		return nil
	}
	cfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	db, err := cfg.Open()
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	st, err := ledger.WriteImport(ctx, db, skus)
	if err != nil {
		return err
	}
	fmt.Printf("inventory import: %d SKU(s), %d lot(s) written\n", st.SKUs, st.Lots)
	return nil
}
