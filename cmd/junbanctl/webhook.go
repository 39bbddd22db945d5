package main

import (
	"context"
	"errors"
)

// runWebhookSend is not written yet.
func runWebhookSend(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}

// runWebhookStorm is not written yet.
func runWebhookStorm(ctx context.Context, args []string) error {
	return errors.New("not implemented yet")
}
