package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// A worker started before its queues exist (docker-compose starts it beside an SQS that is
// still coming up) retries the lookup, logging each failure, and consumes once the queues
// are there. (Fails with the lookup done once, as before JUNBAN_STARTUP_TIMEOUT: the
// worker exits on the first error; tried.)
func TestWorkerWaitsForItsQueues(t *testing.T) {
	ctx := context.Background()
	dbURL := testenv.PostgresURL(t)
	db, err := config.Postgres{URL: dbURL}.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	cfg := resultgen.Config{Seed: 7, SKUs: 2, Active: 3, Prefix: "boot-"}
	stream := resultgen.New(cfg).Results(12)
	if _, err := persist.WriteSKUs(ctx, db, resultgen.Catalog(cfg)); err != nil {
		t.Fatal(err)
	}
	name := testenv.Name(t)
	results, dlq := name+"-results", name+"-results-dlq"

	w := startWorker(t, "DATABASE_URL="+dbURL, "JUNBAN_RESULTS_QUEUE="+results, "JUNBAN_RESULTS_DLQ="+dlq,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_STARTUP_TIMEOUT=10m")
	testenv.WaitFor(t, 30*time.Second, "a failed queue lookup to be logged", func() bool {
		return strings.Count(w.out.String(), "start-up step failed; retrying") >= 2
	})
	if !strings.Contains(w.out.String(), "resolve the results queues") {
		t.Fatalf("the failures logged do not name the step:\n%s", w.out.String())
	}

	c := testenv.SQS(t)
	q, err := queue.EnsurePair(ctx, c, results, dlq, 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, q.URL, stream)
	testenv.WaitFor(t, 60*time.Second, "the results to be applied", func() bool { return count(t, db, "inbox") == int64(len(stream)) })
	select {
	case err := <-w.exited:
		t.Fatalf("worker exited: %v", err)
	default:
	}
}

// Past JUNBAN_STARTUP_TIMEOUT the worker gives up and exits non-zero, naming the step, so
// that a worker that can never reach its queue is seen to fail.
func TestWorkerGivesUpAfterStartupTimeout(t *testing.T) {
	name := testenv.Name(t)
	w := startWorker(t, "DATABASE_URL="+testenv.PostgresURL(t), "JUNBAN_RESULTS_QUEUE="+name+"-absent",
		"JUNBAN_STARTUP_TIMEOUT=2s")
	select {
	case err := <-w.exited:
		if err == nil || !strings.Contains(w.out.String(), "resolve the results queues") {
			t.Fatalf("exit %v, want a failure naming the step:\n%s", err, w.out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the worker still retries long after JUNBAN_STARTUP_TIMEOUT")
	}
}
