package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/ledger"
)

// inventoryConfig: PostgreSQL, where the import writes, and the workers' Redis, to
// refuse SKUs already loaded there.
type inventoryConfig struct {
	config.Redis
	config.Postgres
}

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
SKUs that are live (loaded into Redis under JUNBAN_KEY_PREFIX, or with operations persisted)
are refused with nothing written: Redis is their source of truth, and their stock changes
through inventory.received and inventory.adjusted events.
`, ledger.ImportColumns, ledger.MinDate, ledger.MaxDate)
	}
	if err := parseFlags(fs, args, true); err != nil {
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
	cfg, err := config.Load[inventoryConfig]()
	if err != nil {
		return err
	}
	rc, err := cfg.Redis.Client()
	if err != nil {
		return err
	}
	defer rc.Close()
	db, err := cfg.Postgres.Open()
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	st, err := ledger.WriteImport(ctx, db, skus, ledger.Loaded(rc, cfg.KeyPrefix))
	if err != nil {
		return err
	}
	fmt.Printf("inventory import: %d SKU(s), %d lot(s) written\n", st.SKUs, st.Lots)
	return nil
}
