package loadgen

import (
	"context"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
)

// Import writes the inventory to PostgreSQL, where the ledger loads SKUs from, through
// the same all-or-nothing upsert as `junbanctl inventory import`. It refuses SKUs with
// operations persisted (a run name used again after its run): ledger.ErrLiveSKU.
func Import(ctx context.Context, db *gorm.DB, skus []ledger.SKU) error {
	rows := make([]ledger.ImportSKU, 0, len(skus))
	for _, s := range skus {
		ss := s.SafetyStock
		row := ledger.ImportSKU{SKU: s.SKU, SafetyStock: &ss}
		for i, l := range s.Lots {
			reg := l.RegSeq
			row.Lots = append(row.Lots, ledger.ImportLot{Line: i + 1, Lot: l, RegSeq: &reg})
		}
		rows = append(rows, row)
	}
	_, err := ledger.WriteImport(ctx, db, rows, nil)
	return err
}
