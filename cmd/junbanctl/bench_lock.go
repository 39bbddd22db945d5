package main

import (
	"context"
	"errors"
)

// runBenchLock is not written yet.
func runBenchLock(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
