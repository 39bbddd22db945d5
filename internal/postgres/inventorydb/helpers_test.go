package inventorydb

import (
	"context"

	"github.com/junban/junban/internal/ledger/stock"
)

var ctx = context.Background()

func alloc(op, sku string, qty int64, date string, mode stock.Mode) stock.AllocateRequest {
	return stock.AllocateRequest{OpID: op, SKU: sku, Qty: qty, TargetDate: date, Mode: mode}
}
