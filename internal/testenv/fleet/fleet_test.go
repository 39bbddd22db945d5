package fleet_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/fleet"
)

func TestStartWaitsForReadinessAndStopsCleanly(t *testing.T) {
	bin := testenv.Binary(t, "persist-worker")
	q := testenv.NewQueues(t, testenv.SQS(t), 30)
	env := append(testenv.Env(t), "DATABASE_URL="+testenv.PostgresURL(t),
		"JUNBAN_RESULTS_QUEUE="+q.Results.URL, "JUNBAN_RESULTS_DLQ="+q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_SHUTDOWN_BUDGET=3s")
	p, err := fleet.Start(context.Background(), filepath.Dir(bin), "persist-worker", "pw", t.TempDir(), env)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.Metric(context.Background(), `junban_queue_receive_errors_total{queue="`+filepath.Base(q.Results.URL)+`"}`); err != nil || n != 0 {
		t.Fatalf("receive errors of a fresh persist-worker: %v, %v", n, err)
	}
	start, err := p.Metric(context.Background(), "process_start_time_seconds")
	if err != nil || start <= 0 {
		t.Fatalf("process_start_time_seconds: %v, %v", start, err)
	}
	if sum, err := fleet.MetricSum(context.Background(), "process_start_time_seconds", p.Addr, p.Addr); err != nil || sum != 2*start {
		t.Fatalf("MetricSum over the same listener twice: %v, %v; want %v", sum, err, 2*start)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	// A binary that cannot get ready (no DATABASE_URL) is reported, not waited on forever.
	if _, err := fleet.Start(context.Background(), filepath.Dir(bin), "persist-worker", "broken", t.TempDir(),
		[]string{"JUNBAN_STACK_ENV=/nonexistent", "DATABASE_URL="}); err == nil {
		t.Fatal("a persist-worker without DATABASE_URL became ready")
	}
}
