package inventorydb

import (
	"context"

	"github.com/junban/junban/internal/ledger"
)

var ctx = context.Background()

func alloc(op, sku string, qty int64, date string, mode ledger.Mode) ledger.AllocateRequest {
	return ledger.AllocateRequest{OpID: op, SKU: sku, Qty: qty, TargetDate: date, Mode: mode}
}
