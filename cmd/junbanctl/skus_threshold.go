package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
)

// thresholdReport is what skus threshold prints with --json.
type thresholdReport struct {
	SKU string `json:"sku"`
	// Threshold is the SKU's own low-stock threshold; null: the persist-worker's
	// JUNBAN_STOCK_LOW_THRESHOLD.
	Threshold *int64 `json:"threshold"`
}

func skusThresholdCmd() *cobra.Command {
	var useDefault, asJSON bool
	c := &cobra.Command{
		Use:   "threshold SKU (N | --default) [--json]",
		Short: "set a SKU's low-stock threshold, or give it the default back",
		Long: "threshold sets skus.low_stock_threshold: the SKU's stock.low event comes when its\n" +
			"available-to-ship falls to N or below; --default clears it, so that the persist-worker's\n" +
			"JUNBAN_STOCK_LOW_THRESHOLD applies. It takes effect at the SKU's next move. The SKU must\n" +
			"be in PostgreSQL already (registered, or imported).",
		Args: func(c *cobra.Command, args []string) error {
			switch {
			case useDefault && len(args) != 1:
				return cli.Usagef("%s --default takes one SKU, got %q", c.CommandPath(), args)
			case !useDefault && len(args) != 2:
				return cli.Usagef("%s takes a SKU and a threshold (or --default), got %q", c.CommandPath(), args)
			case args[0] == "":
				return cli.Usagef("%s: empty SKU", c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			var n *int64
			if !useDefault {
				v, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil || v < 0 {
					return cli.Usagef("%s: threshold %q is not a whole number of 0 or more", c.CommandPath(), args[1])
				}
				n = &v
			}
			return skusThreshold(c.Context(), c.OutOrStdout(), args[0], n, asJSON)
		},
	}
	c.Flags().BoolVar(&useDefault, "default", false, "clear the SKU's threshold: JUNBAN_STOCK_LOW_THRESHOLD applies")
	c.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return c
}

// skusThreshold sets sku's low-stock threshold to n (nil: clears it).
func skusThreshold(ctx context.Context, w io.Writer, sku string, n *int64, asJSON bool) error {
	cfg, err := config.Load[config.Postgres]()
	if err != nil {
		return err
	}
	db, err := cfg.OpenPool(1)
	if err != nil {
		return err
	}
	if sqlDB, err := db.DB(); err == nil {
		defer sqlDB.Close()
	}
	res := db.WithContext(ctx).Exec(`UPDATE skus SET low_stock_threshold = ? WHERE sku = ?`, n, sku)
	if res.Error != nil {
		return fmt.Errorf("skus threshold: %s: %w", sku, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("skus threshold: PostgreSQL holds no SKU %q (register or import it first)", sku)
	}
	if asJSON {
		return cli.WriteJSON(w, thresholdReport{SKU: sku, Threshold: n})
	}
	if n == nil {
		fmt.Fprintf(w, "skus threshold: %s takes the default (JUNBAN_STOCK_LOW_THRESHOLD) from its next move\n", sku)
		return nil
	}
	fmt.Fprintf(w, "skus threshold: %s is low at %d or below from its next move\n", sku, *n)
	return nil
}
