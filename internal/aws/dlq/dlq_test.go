package dlq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// List returns each message once with its reason and source, says when it stopped at
// the bound, and leaves every message in the queue, visible.
func TestListLeavesTheMessages(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		for i := range 4 {
			if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(fmt.Sprint("m", i)), "ERR_X boom", map[string]string{queue.AttrSourceQueue: q.OrdersName}); err != nil {
				t.Fatal(err)
			}
		}
		all, more, err := List(ctx, c, q.Orders.DLQURL, 10)
		if err != nil || len(all) != 4 || more {
			t.Fatalf("list: %d messages, more %v, %v", len(all), more, err)
		}
		seen := map[string]bool{}
		for _, m := range all {
			if seen[m.ID] || m.Reason != "ERR_X boom" || m.Source != q.OrdersName || m.SentAt.IsZero() || m.Receives < 1 {
				t.Fatalf("message %+v", m)
			}
			seen[m.ID] = true
		}
		some, more, err := List(ctx, c, q.Orders.DLQURL, 2)
		if err != nil || len(some) != 2 || !more {
			t.Fatalf("list of 2: %d messages, more %v, %v", len(some), more, err)
		}
		again, _, err := List(ctx, c, q.Orders.DLQURL, 10)
		if err != nil || len(again) != 4 {
			t.Fatalf("the listed messages are not visible again: %d %v", len(again), err)
		}
	})
}

// A quarantined event's failed runs and their times come back from List.
func TestListShowsAQuarantinesFailures(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		first, last := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 10, 5, 0, 123e6, time.UTC)
		attrs := map[string]string{queue.AttrAttempts: "10", queue.AttrFirstFailure: first.Format(time.RFC3339Nano), queue.AttrLastFailure: last.Format(time.RFC3339Nano)}
		if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(`{"event_id":"e1"}`), "ERR_MAX_ATTEMPTS: 10 failed runs", attrs); err != nil {
			t.Fatal(err)
		}
		msgs, _, err := List(ctx, c, q.Orders.DLQURL, 10)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("list: %v %v", msgs, err)
		}
		m := msgs[0]
		if m.Attempts != 10 || !m.FirstFailure.Equal(first) || !m.LastFailure.Equal(last) || m.Reason != "ERR_MAX_ATTEMPTS: 10 failed runs" {
			t.Fatalf("listed %+v", m)
		}
	})
}
