package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A failing step is retried, each failure logged with the step, until it succeeds.
func TestStartupRetryRetriesUntilTheStepSucceeds(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	calls := 0
	err := Startup{}.Retry(context.Background(), zap.New(core), "look up the queues", func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("AWS.SimpleQueueService.NonExistentQueue")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want success at the third", err, calls)
	}
	if n := logs.FilterField(zap.String("step", "look up the queues")).Len(); n != 2 {
		t.Errorf("%d failures logged with the step, want 2", n)
	}
}

// A permanent error ends the retries at once; a stop during a pause ends them too, and
// the error names the step and the last failure.
func TestStartupRetryStops(t *testing.T) {
	bad := errors.New("JUNBAN_MAX_LINES=500 lets an event's result grow too large")
	calls := 0
	err := Startup{}.Retry(context.Background(), zap.NewNop(), "check", func(context.Context) error {
		calls++
		return backoff.Permanent(bad)
	})
	if !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("err %v after %d calls, want the permanent error after one", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	err = Startup{}.Retry(ctx, zap.NewNop(), "look up the queues", func(context.Context) error {
		cancel()
		return errors.New("connection refused")
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "look up the queues") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err %v, want context.Canceled naming the step and the last failure", err)
	}
}
