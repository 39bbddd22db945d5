package loadgen

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
)

// Import writes the inventory to PostgreSQL, where the ledger loads SKUs from.
func Import(ctx context.Context, db *gorm.DB, skus []ledger.SKU) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, s := range skus {
			if err := tx.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES (?, ?, ?)`, s.SKU, s.SafetyStock, s.Version).Error; err != nil {
				return fmt.Errorf("loadgen: sku %s: %w", s.SKU, err)
			}
			for _, l := range s.Lots {
				err := tx.Exec(`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to,
					sellable, reserved, allocated, hidden, shipped, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
					s.SKU, l.LotID, l.Kind, l.Good, nullDate(l.BestBefore), l.RegSeq, nullDate(l.ArrivesAt), l.ValidFrom, l.ValidTo,
					l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, s.Version).Error
				if err != nil {
					return fmt.Errorf("loadgen: lot %s/%s: %w", s.SKU, l.LotID, err)
				}
			}
		}
		return nil
	})
}

func nullDate(s string) any {
	if s == "" {
		return nil
	}
	return s
}
