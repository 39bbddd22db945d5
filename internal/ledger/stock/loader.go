package stock

import "context"

// Loader supplies a SKU's state for its first load into Redis.
type Loader interface {
	// LoadSKU returns the SKU with its lots; ErrUnknownSKU if there is no such SKU.
	LoadSKU(ctx context.Context, sku string) (SKU, error)
}
