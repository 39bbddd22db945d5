package main

import (
	"context"
	"errors"
)

// runInventoryImport is not written yet.
func runInventoryImport(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
