package ledger

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"
)

// Loader supplies a SKU's state for its first load into Redis.
type Loader interface {
	// LoadSKU returns the SKU with its lots; ErrUnknownSKU if there is no such SKU.
	LoadSKU(ctx context.Context, sku string) (SKU, error)
}

// PGLoader loads SKUs from PostgreSQL (tables skus and lots, migrations/00001_init.sql and
// 00003, which added the defective bucket).
type PGLoader struct{ DB *gorm.DB }

// LoadQuerySKU and LoadQueryLots are the queries PGLoader runs, in one repeatable-read
// transaction so the SKU row and its lots come from one snapshot.
// LotColumns are the columns of a lot row as Lot reads them; LoadQueryLots selects them.
const (
	LoadQuerySKU = `SELECT safety_stock, version FROM skus WHERE sku = ?`
	LotColumns   = `lot_id, kind, good,
       coalesce(to_char(best_before, 'YYYY-MM-DD'), '') AS best_before,
       reg_seq,
       coalesce(to_char(arrives_at, 'YYYY-MM-DD'), '') AS arrives_at,
       to_char(valid_from, 'YYYY-MM-DD') AS valid_from,
       to_char(valid_to, 'YYYY-MM-DD') AS valid_to,
       sellable, reserved, allocated, hidden, shipped, defective`
	LoadQueryLots = `SELECT ` + LotColumns + `
  FROM lots WHERE sku = ? ORDER BY reg_seq, lot_id`
)

// LoadSKU implements Loader.
func (p PGLoader) LoadSKU(ctx context.Context, sku string) (SKU, error) {
	s := SKU{SKU: sku, Lots: []Lot{}}
	err := p.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var head []struct{ SafetyStock, Version int64 }
		if err := tx.Raw(LoadQuerySKU, sku).Scan(&head).Error; err != nil {
			return err
		}
		if len(head) == 0 {
			return fmt.Errorf("sku=%s: %w", sku, ErrUnknownSKU)
		}
		s.SafetyStock, s.Version = head[0].SafetyStock, head[0].Version
		return tx.Raw(LoadQueryLots, sku).Scan(&s.Lots).Error
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return s, err
}
