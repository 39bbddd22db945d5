package main

import (
	"context"
	"errors"
)

// runBenchAlloc is not written yet.
func runBenchAlloc(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
