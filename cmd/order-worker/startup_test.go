package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// A worker started before its queues exist (docker-compose starts it while the SQS
// emulator or LocalStack's init is still coming up) retries the lookups, logging each
// failure, and consumes once the queues are there. (Fails with the lookups done once, as
// before JUNBAN_STARTUP_TIMEOUT: the worker exits on the first GetQueueUrl error; tried.)
func TestWorkerWaitsForItsQueues(t *testing.T) {
	f := newFleet(t)
	name := testenv.Name(t)
	orders, results := name+"-orders", name+"-results"
	for i, kv := range f.env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "JUNBAN_ORDERS_QUEUE":
			f.env[i] = k + "=" + orders
		case "JUNBAN_ORDERS_DLQ":
			f.env[i] = k + "=" + orders + "-dlq"
		case "JUNBAN_RESULTS_QUEUE":
			f.env[i] = k + "=" + results
		case "JUNBAN_RESULTS_DLQ":
			f.env[i] = k + "=" + results + "-dlq"
		}
	}
	f.env = append(f.env, "JUNBAN_STARTUP_TIMEOUT=10m")
	w := loadgen.Generate(ampleSpec("S"+testenv.ID(), 10))
	f.seed(w)
	f.start(1)
	p := f.procs[0]
	testenv.WaitFor(t, time.Minute, "a retried queue lookup", func() bool {
		if p.Exited() {
			t.Fatalf("the worker exited before it retried the queue lookup:\n%s", p.Output())
		}
		return strings.Count(p.Output(), "start-up step failed; retrying") >= 2
	})
	if !strings.Contains(p.Output(), "look up the queues") {
		t.Fatalf("the failures logged do not name the step:\n%s", p.Output())
	}

	ctx := context.Background()
	var err error
	if f.queues.Orders, err = queue.EnsurePair(ctx, f.sqs, orders, orders+"-dlq", 5, 20); err != nil {
		t.Fatal(err)
	}
	if f.queues.Results, err = queue.EnsurePair(ctx, f.sqs, results, results+"-dlq", 5, 20); err != nil {
		t.Fatal(err)
	}
	f.send(w.Events)
	f.collect(distinctIDs(w.Events), 2*time.Minute, nil)
	if p.Exited() {
		t.Fatalf("the worker exited:\n%s", p.Output())
	}
}
