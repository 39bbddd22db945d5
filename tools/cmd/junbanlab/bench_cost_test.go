package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/tools/costbench"
)

// bench cost --json on a tiny workload, idle phase included: the document is whole and
// the run counted CPU, SQS requests of both queues and an idle fleet's receives. The
// figures themselves are not looked at.
func TestJSONOfBenchCost(t *testing.T) {
	bins := benchCostEnv(t)
	var doc struct {
		Result   costbench.Result `json:"result"`
		Baseline map[string]any   `json:"baseline"`
		Target   map[string]any   `json:"target"`
	}
	if err := decode(t, &doc, "bench cost", "--orders", "20", "--rate", "200", "--idle", "21s", "--bin", bins); err != nil {
		t.Fatal(err)
	}
	r := doc.Result
	if len(doc.Baseline) == 0 || len(doc.Target) == 0 {
		t.Fatalf("no baseline or target: %+v", doc)
	}
	if r.Events <= 0 || r.SQSPerEvent <= 0 || r.OrderWorkerCPUMS <= 0 || r.PersistWorkerCPUMS <= 0 || r.PGRowsPerEvent <= 0 {
		t.Fatalf("bench cost measured nothing: %+v", r)
	}
	// The persist-worker's own transactions: a batch holds one result at least. (A sanity
	// bound only: at this small load the database-wide count would pass it too.)
	if r.PGXactsPerEvent <= 0 || r.PGXactsPerEvent > 1 {
		t.Errorf("PostgreSQL transactions per event %v, want the persist-worker's batches: in (0, 1]", r.PGXactsPerEvent)
	}
	// Each process's threads woke up for the events (from /proc: Linux only).
	if runtime.GOOS == "linux" {
		if len(r.Switches) != len(r.CPUMS) || r.OrderWorkerSwitches <= 0 || r.PersistWorkerSwitches <= 0 {
			t.Errorf("context switches per event %v (order-workers %v, persist-worker %v), want every process's, above 0",
				r.Switches, r.OrderWorkerSwitches, r.PersistWorkerSwitches)
		}
	}
	// The test stack's PostgreSQL runs on this host: the server's CPU is there.
	if runtime.GOOS == "linux" && (r.PGCPUMS == nil || *r.PGCPUMS <= 0 || r.Idle == nil || r.Idle.PGCPUMSPerS == nil) {
		t.Errorf("PostgreSQL server CPU per event %v (idle: %+v), want above 0, and the idle fleet's", r.PGCPUMS, r.Idle)
	}
	queues := map[string]bool{}
	for _, row := range r.SQS {
		queues[row.Queue] = true
	}
	if !queues["orders"] || !queues["results"] {
		t.Fatalf("SQS rows %+v, want both queues", r.SQS)
	}
	if r.Idle == nil || r.Idle.Requests <= 0 {
		t.Fatalf("idle: %+v, want the receives of 21 s at a 20 s wait", r.Idle)
	}
	// The idle CPU: every process's figure (the persist-worker's may round to 0 at /proc's
	// 10 ms), the order-workers' sweepers and scanners above 0, and Redis's.
	if len(r.Idle.CPUMSPerS) != len(r.CPUMS) || r.Idle.CPUMSPerS["order-worker-0"] <= 0 || r.Idle.RedisCPUMSPerS <= 0 {
		t.Fatalf("idle CPU %v ms a second, Redis %v, want every process's and Redis's", r.Idle.CPUMSPerS, r.Idle.RedisCPUMSPerS)
	}
}

// bench cost --runs 2 --json: both runs, and the summary of their headline figures.
func TestJSONOfBenchCostRuns(t *testing.T) {
	bins := benchCostEnv(t)
	var doc struct {
		Runs     []costbench.Result `json:"runs"`
		Summary  costbench.Summary  `json:"summary"`
		Baseline map[string]any     `json:"baseline"`
		Target   map[string]any     `json:"target"`
	}
	if err := decode(t, &doc, "bench cost", "--orders", "10", "--rate", "200", "--idle", "0", "--runs", "2", "--bin", bins); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || doc.Summary.Runs != 2 || len(doc.Summary.Figures) != 5 {
		t.Fatalf("runs %d, summary %+v: want two runs and five figures", len(doc.Runs), doc.Summary)
	}
	for i, r := range doc.Runs {
		if r.Events <= 0 || r.OrderWorkerCPUMS <= 0 {
			t.Fatalf("run %d measured nothing: %+v", i+1, r)
		}
	}
	if f := doc.Summary.Figures[1]; len(f.Values) != 2 || f.Min > f.Median || f.Median > f.Max {
		t.Fatalf("order-worker CPU over the runs: %+v", f)
	}
}

// bench cost --baseline-bin --json: the baseline's fleet (here a copy of the same binaries
// in a directory of its own) runs the same load, and the summary gives each figure over
// the baseline's of the same run.
func TestJSONOfBenchCostBesideABaseline(t *testing.T) {
	bins := benchCostEnv(t)
	base := t.TempDir()
	for _, bin := range []string{"order-worker", "persist-worker"} {
		b, err := os.ReadFile(filepath.Join(bins, bin))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(base, bin), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var doc struct {
		Result   costbench.Result  `json:"result"`
		Base     costbench.Result  `json:"baseline_result"`
		Summary  costbench.Summary `json:"summary"`
		Baseline map[string]any    `json:"baseline"`
		Target   map[string]any    `json:"target"`
	}
	if err := decode(t, &doc, "bench cost", "--orders", "10", "--rate", "200", "--idle", "0", "--bin", bins, "--baseline-bin", base); err != nil {
		t.Fatal(err)
	}
	if doc.Result.Events <= 0 || doc.Base.Events != doc.Result.Events || doc.Base.OrderWorkerCPUMS <= 0 {
		t.Fatalf("the baseline's run %+v beside %+v: want the same distinct events, measured", doc.Base, doc.Result)
	}
	ow := doc.Summary.Figures[1].SameSitting
	if ow == nil || len(ow.Ratios) != 1 || ow.Target <= 0 {
		t.Fatalf("order-workers beside the baseline: %+v", ow)
	}
	if want := doc.Result.OrderWorkerCPUMS / doc.Base.OrderWorkerCPUMS; math.Abs(ow.Ratios[0]-want) > 0.002 {
		t.Fatalf("ratio %v, want %v over %v = %v", ow.Ratios[0], doc.Result.OrderWorkerCPUMS, doc.Base.OrderWorkerCPUMS, want)
	}
}

// benchCostEnv skips under -short and otherwise readies a bench cost run: the binaries
// (their directory is returned), the lab's environment and the test database, in which
// bench cost makes a schema of its own.
func benchCostEnv(t *testing.T) (bins string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a fleet")
	}
	bins = filepath.Dir(testenv.Binary(t, "order-worker"))
	testenv.Binary(t, "persist-worker")
	labEnv(t)
	t.Setenv("DATABASE_URL", os.Getenv("JUNBAN_TEST_DATABASE_URL"))
	return bins
}
