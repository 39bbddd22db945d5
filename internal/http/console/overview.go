package console

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order/turninfo"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/queue"
)

// rateWindow is the window of the overview's rates and persistence lag.
const rateWindow = 10 * time.Second

// inspectBound bounds the turns one overview sample inspects for the orders in flight
// and the oldest waiting envelope, so a sample costs a bounded number of Redis calls.
const inspectBound = 500

// Sample is one reading of the overview.
type Sample struct {
	At time.Time `json:"at"`
	// ProcessedPerSec: events the order-workers took a result for (inbox.processed_at),
	// PersistedPerSec: results the persist-worker committed (inbox.committed_at), over
	// the last rateWindow.
	ProcessedPerSec float64 `json:"processed_per_sec"`
	PersistedPerSec float64 `json:"persisted_per_sec"`
	// Depths are the queues' visible, in-flight and delayed messages (-1: unreadable).
	Depths map[string]int `json:"depths"`
	// InFlight counts the turns with an event in hand or waiting (of the first
	// inspectBound in the backlog index); OldestWaitSec is the age of the oldest event in
	// hand among them.
	InFlight      int     `json:"in_flight"`
	InFlightMore  bool    `json:"in_flight_more"`
	OldestWaitSec float64 `json:"oldest_wait_sec"`
	// Stuck is the number of stuck turns the API lists (-1: unreadable).
	Stuck int `json:"stuck"`
	// PersistLagSec is the longest time from a result to its commit in PostgreSQL over the
	// last rateWindow; a persist-worker that stopped shows in the results queue's depth.
	PersistLagSec float64 `json:"persist_lag_sec"`
	// OutboxDepth counts the outbound messages the relay has not published yet;
	// OutboxLagSec is the age of the oldest of them (both 0 when none waits).
	OutboxDepth  int64   `json:"outbox_depth"`
	OutboxLagSec float64 `json:"outbox_lag_sec"`
	// DueHolds counts the placed orders whose hold_until has passed in PostgreSQL (the
	// order-worker has not expired them yet, or their expiry is not persisted yet);
	// DueOldestSec is how long ago the oldest of them was due (both 0 when none is).
	DueHolds     int64   `json:"due_holds"`
	DueOldestSec float64 `json:"due_oldest_sec"`
	// Persisted counts every result in PostgreSQL, Orders the persisted orders by status.
	Persisted int64            `json:"persisted"`
	Orders    map[string]int64 `json:"orders"`
}

// Queue roles of Sample.Depths.
var queueRoles = []string{"orders", "results", "orders_dlq", "results_dlq"}

func (c *Console) queueName(role string) string {
	q := c.d.Queues
	return map[string]string{"orders": q.OrdersQueue, "results": q.ResultsQueue, "orders_dlq": q.OrdersDLQ, "results_dlq": q.ResultsDLQ}[role]
}

func (c *Console) queueURL(ctx context.Context, name string) (string, error) {
	c.mu.Lock()
	u, ok := c.urls[name]
	c.mu.Unlock()
	if ok {
		return u, nil
	}
	u, err := queue.ResolveURL(ctx, c.d.SQS, name)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.urls[name] = u
	c.mu.Unlock()
	return u, nil
}

// sample returns the newest sample, reading a new one when the last is older than
// SampleEveryDefault less a margin, so that any number of open pages cost one reading
// per interval.
func (c *Console) sample(r *http.Request, s session) Sample {
	c.mu.Lock()
	if n := len(c.history); n > 0 && c.d.Now().Sub(c.history[n-1].At) < SampleEveryDefault*3/4 {
		last := c.history[n-1]
		c.mu.Unlock()
		return last
	}
	c.mu.Unlock()
	sm := c.read(r, s)
	c.mu.Lock()
	c.history = append(c.history, sm)
	if len(c.history) > HistoryDefault {
		c.history = c.history[len(c.history)-HistoryDefault:]
	}
	c.mu.Unlock()
	return sm
}

func (c *Console) read(r *http.Request, s session) Sample {
	ctx := r.Context()
	now := c.d.Now()
	sm := Sample{At: now, Depths: map[string]int{}, Orders: map[string]int64{}, Stuck: -1}
	for _, role := range queueRoles {
		sm.Depths[role] = -1
		name := c.queueName(role)
		if name == "" || c.d.SQS == nil {
			continue
		}
		u, err := c.queueURL(ctx, name)
		if err == nil {
			_, sm.Depths[role], err = dlq.QueueState(ctx, c.d.SQS, u)
		}
		if err != nil {
			sm.Depths[role] = -1
			c.d.Logger.Debug("console: queue depth", zap.String("queue", name), zap.Error(err))
		}
	}
	var rates struct {
		Processed, Persisted int64
		Lag                  float64
	}
	since := now.Add(-rateWindow)
	err := c.d.DB.WithContext(ctx).Raw(`SELECT
  count(*) FILTER (WHERE processed_at > ?) AS processed,
  count(*) FILTER (WHERE committed_at > ?) AS persisted,
  COALESCE(EXTRACT(EPOCH FROM max(committed_at - processed_at) FILTER (WHERE committed_at > ?)), 0) AS lag
FROM inbox WHERE committed_at > ? OR processed_at > ?`, since, since, since, since, since).Scan(&rates).Error
	if err != nil {
		c.d.Logger.Debug("console: rates", zap.Error(err))
	}
	sm.ProcessedPerSec = float64(rates.Processed) / rateWindow.Seconds()
	sm.PersistedPerSec = float64(rates.Persisted) / rateWindow.Seconds()
	sm.PersistLagSec = rates.Lag
	c.d.DB.WithContext(ctx).Raw(`SELECT count(*) FROM inbox`).Scan(&sm.Persisted)
	if st, err := outbound.ReadStats(ctx, c.d.DB); err != nil {
		c.d.Logger.Debug("console: outbox", zap.Error(err))
	} else {
		sm.OutboxDepth, sm.OutboxLagSec = st.Unpublished, st.OldestUnpublished.Seconds()
	}
	// The partial index orders_hold_due serves this.
	var due struct {
		N      int64
		Oldest float64
	}
	if err := c.d.DB.WithContext(ctx).Raw(`SELECT count(*) AS n, COALESCE(EXTRACT(EPOCH FROM ?::timestamptz - min(hold_until)), 0) AS oldest
FROM orders WHERE status = 'placed' AND hold_until IS NOT NULL AND hold_until <= ?::timestamptz`, now, now).Scan(&due).Error; err != nil {
		c.d.Logger.Debug("console: due holds", zap.Error(err))
	}
	sm.DueHolds, sm.DueOldestSec = due.N, due.Oldest
	var byStatus []struct {
		Status string
		N      int64
	}
	c.d.DB.WithContext(ctx).Raw(`SELECT status, count(*) AS n FROM orders GROUP BY status`).Scan(&byStatus)
	for _, b := range byStatus {
		sm.Orders[b.Status] = b.N
	}

	if entries, err := lockhandoff.BacklogIndex(ctx, c.d.Redis, c.d.Prefix, c.d.IndexShards); err == nil {
		for i, e := range entries {
			if i == inspectBound {
				sm.InFlightMore = true
				break
			}
			t, err := turninfo.Inspect(ctx, c.d.Redis, c.d.Prefix, e.Entity)
			if err != nil {
				continue
			}
			if t.Proc != nil || t.WaitDepth > 0 {
				sm.InFlight++
			}
			if t.Proc != nil && !t.Proc.EnqueuedAt.IsZero() {
				sm.OldestWaitSec = max(sm.OldestWaitSec, now.Sub(t.Proc.EnqueuedAt).Seconds())
			}
		}
	}
	sm.Stuck = c.stuckCount(r, s)
	return sm
}

// stuckEvery is how often the overview asks the API for the stuck turns: the list
// inspects every turn of the backlog index (up to 2000), too much for every sample.
const stuckEvery = 10 * time.Second

// stuckCount returns the number of stuck turns the API lists, read at most every
// stuckEvery (-1: unreadable).
func (c *Console) stuckCount(r *http.Request, s session) int {
	c.mu.Lock()
	if !c.stuckAt.IsZero() && c.d.Now().Sub(c.stuckAt) < stuckEvery {
		n := c.stuck
		c.mu.Unlock()
		return n
	}
	c.mu.Unlock()
	n := -1
	var l api.StuckList
	if code, _ := c.callAPI(r, s, "GET", "/v1/turns/stuck?limit=500", nil, &l); code == http.StatusOK {
		n = len(l.Turns)
	}
	c.mu.Lock()
	c.stuck, c.stuckAt = n, c.d.Now()
	c.mu.Unlock()
	return n
}

type overviewData struct {
	Last    Sample   `json:"last"`
	History []Sample `json:"history"`
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s session) {
	last := c.sample(r, s)
	c.mu.Lock()
	hist := append([]Sample(nil), c.history...)
	c.mu.Unlock()
	c.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Session: s, Data: overviewData{Last: last, History: hist}})
}

// overviewJSON is what the overview page polls: the newest sample and the history.
func (c *Console) overviewJSON(w http.ResponseWriter, r *http.Request, s session) {
	last := c.sample(r, s)
	c.mu.Lock()
	hist := append([]Sample(nil), c.history...)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(overviewData{Last: last, History: hist})
}
