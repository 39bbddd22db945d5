package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/turninfo"
	"github.com/junban/junban/internal/testenv"
)

// turn show reports the event stuck in an order's turn with its failed runs, and turn
// skip has it quarantined by the next worker that resumes the order, which the command
// nudges with a drain message.
func TestTurnShowAndSkip(t *testing.T) {
	c, q := dlqTestEnv(t, testenv.NewQueues)
	rc, prefix := testenv.Redis(t)
	t.Setenv("REDIS_URL", testenv.RedisURL(t))
	t.Setenv("JUNBAN_KEY_PREFIX", prefix)
	ctx := context.Background()

	var mu sync.Mutex
	var skipped []lockhandoff.Failure
	hd, err := lockhandoff.New(lockhandoff.Config{
		Redis:  rc,
		Prefix: prefix, MaxAttempts: 1000, HandlerRetries: 1,
		Handler: lockhandoff.Funcs{OnQuarantine: func(ctx context.Context, tn lockhandoff.Turn, env []byte, f lockhandoff.Failure) (lockhandoff.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			skipped = append(skipped, f)
			return lockhandoff.Result{}, nil
		}, OnStep: func(ctx context.Context, tn lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
			return lockhandoff.Result{}, errors.New("stock service away")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hd.Stop(context.Background()) }()
	body := `{"event_id":"evt-stuck","type":"payment.confirmed","lcid":"LC-STUCK","occurred_at":"2026-12-01T10:00:00Z"}`
	if _, err := hd.Submit(ctx, "LC-STUCK", []byte(body)); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()

	var out bytes.Buffer
	if err := ctl(ctx, &out, "turn show", []string{"--json", "LC-STUCK"}); err != nil {
		t.Fatal(err)
	}
	var r turninfo.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r.Proc == nil || r.Proc.EventID != "evt-stuck" || r.Proc.Attempts != 2 || r.Proc.LastError != "stock service away" || r.Holder != "" || r.Proc.SkipAsked {
		t.Fatalf("turn show: %s", out.String())
	}
	out.Reset()
	if err := ctl(ctx, &out, "turn show", []string{"LC-STUCK"}); err != nil || !strings.Contains(out.String(), "attempts: 2 failed") {
		t.Fatalf("turn show (text): %v\n%s", err, out.String())
	}

	var skip turnSkipReport
	if err := decode(t, &skip, "turn skip", "LC-STUCK"); err != nil ||
		skip != (turnSkipReport{Entity: "LC-STUCK", EventID: "evt-stuck", Type: "payment.confirmed", Reason: order.ReasonSkipped}) {
		t.Fatalf("turn skip --json: %+v, %v", skip, err)
	}
	nudges := take(t, c, q.Orders.URL)
	var drain *event.Order
	for b := range nudges {
		var o event.Order
		if json.Unmarshal([]byte(b), &o) == nil && o.Type == event.Drain && o.LCID == "LC-STUCK" {
			drain = &o
		}
	}
	if drain == nil {
		t.Fatalf("no drain nudge for LC-STUCK on the orders queue: %v", nudges)
	}
	if r, err := turninfo.Inspect(ctx, rc, prefix, "LC-STUCK"); err != nil || r.Proc == nil || !r.Proc.SkipAsked {
		t.Fatalf("after skip: %+v %v", r.Proc, err)
	}
	// The drain's consumer resumes the order: the event is quarantined without a run.
	if err := hd.Resume(ctx, "LC-STUCK"); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	mu.Lock()
	defer mu.Unlock()
	if len(skipped) != 1 || !skipped[0].Skipped || skipped[0].Attempts != 2 {
		t.Fatalf("quarantined: %+v", skipped)
	}
	if r, _ := turninfo.Inspect(ctx, rc, prefix, "LC-STUCK"); r.Proc != nil || r.Holder != "" {
		t.Fatalf("turn after the skip: %+v", r)
	}
	if err := ctl(ctx, nil, "turn skip", []string{"LC-STUCK"}); !errors.Is(err, lockhandoff.ErrNothingToSkip) {
		t.Fatalf("second skip: %v", err)
	}
	for _, args := range [][]string{{}, {"a", "b"}, {"LC{1}"}} {
		if err := ctl(ctx, nil, "turn skip", args); err == nil {
			t.Errorf("turn skip %q: no error", args)
		}
	}
}
