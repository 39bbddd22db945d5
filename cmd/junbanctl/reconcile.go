package main

import (
	"context"
	"errors"
)

// runReconcile is not written yet.
func runReconcile(ctx context.Context, args []string) error { return errors.New("not implemented yet") }
