package main

import (
	"context"
	"errors"
)

// runBenchPersist is not written yet.
func runBenchPersist(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
