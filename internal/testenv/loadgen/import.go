package loadgen

import (
	"context"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// Import writes the inventory to PostgreSQL, where the ledger loads SKUs from, through
// the same all-or-nothing upsert as `junbanctl inventory import`. It refuses SKUs with
// operations persisted (a run name used again after its run): inventorydb.ErrLiveSKU.
func Import(ctx context.Context, db *gorm.DB, skus []stock.SKU) error {
	rows := make([]inventorydb.ImportSKU, 0, len(skus))
	for _, s := range skus {
		ss := s.SafetyStock
		row := inventorydb.ImportSKU{SKU: s.SKU, SafetyStock: &ss}
		for i, l := range s.Lots {
			reg := l.RegSeq
			row.Lots = append(row.Lots, inventorydb.ImportLot{Line: i + 1, Lot: l, RegSeq: &reg})
		}
		rows = append(rows, row)
	}
	_, err := inventorydb.WriteImport(ctx, db, rows, nil)
	return err
}
