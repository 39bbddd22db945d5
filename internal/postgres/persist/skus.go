package persist

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger/stock"
)

// WriteSKUs writes whole SKUs (settings, every lot, every transfer and every waiting line) in one transaction, each row only
// where the given version is newer than the stored one (the safety stock where the
// stored settings version is older than the given version), and returns how many SKU
// rows it wrote. Reconcile's repair uses it to rewrite PostgreSQL from Redis; tests and
// the benchmark use it to load a catalog.
func WriteSKUs(ctx context.Context, db *gorm.DB, skus []stock.SKU) (int, error) {
	var p prepared
	for _, s := range skus {
		if s.SKU == "" {
			return 0, fmt.Errorf("%w: sku without name", ErrInvalid)
		}
		// A whole SKU's safety stock is as of its version.
		p.skus = append(p.skus, SKURow{SKU: s.SKU, SafetyStock: s.SafetyStock, SettingsVersion: s.Version, Version: s.Version,
			LocationSafety: s.LocationSafety})
		for _, l := range s.Lots {
			row, err := lotRow(s.SKU, s.Version, l)
			if err != nil {
				return 0, fmt.Errorf("%w: sku %s lot %s: %v", ErrInvalid, s.SKU, l.LotID, err)
			}
			p.lots = append(p.lots, row)
		}
		for _, t := range s.Transfers {
			row, err := transferRow(s.SKU, s.Version, t)
			if err != nil {
				return 0, fmt.Errorf("%w: sku %s transfer %s: %v", ErrInvalid, s.SKU, t.TransferID, err)
			}
			p.transfers = append(p.transfers, row)
		}
		for _, e := range s.Queue {
			row, err := backorderRow(s.SKU, s.Version, e)
			if err != nil {
				return 0, fmt.Errorf("%w: sku %s queue holder %s line %s: %v", ErrInvalid, s.SKU, e.Holder, e.Line, err)
			}
			p.backorders = append(p.backorders, row)
		}
	}
	var n int
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if n, _, err = writeSKUs(tx, p.skus, p.lots); err != nil {
			return err
		}
		if _, err = writeTransfers(tx, p.transfers); err != nil {
			return err
		}
		_, err = writeBackorders(tx, p.backorders)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("persist: write skus: %w", err)
	}
	return n, nil
}

// newestLocationSafety are the rows of sku_location_safety that SKU rows carry: per SKU
// and location, the one of the highest version (one statement cannot update a row twice).
func newestLocationSafety(skus []SKURow) []LocationSafetyRow {
	var rows []LocationSafetyRow
	for _, s := range skus {
		for loc, n := range s.LocationSafety {
			rows = append(rows, LocationSafetyRow{SKU: s.SKU, Location: loc, SafetyStock: n, Version: s.Version})
		}
	}
	return newestRows(rows)
}
