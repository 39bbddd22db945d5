package costbench

import (
	"context"
	"maps"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// scrape reads labelled series as the Prometheus client writes them, an empty label and
// an escaped quote included, and only the metrics it was asked for.
func TestScrapeReadsLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "junban_sqs_requests_total", Help: "h"}, []string{"queue", "action", "error"})
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "junban_other_total", Help: "h"})
	reg.MustRegister(v, other)
	v.WithLabelValues("bc1-orders", "ReceiveMessage", "").Add(3)
	v.WithLabelValues("bc1-results", "SendMessageBatch", `odd "code"`).Add(2)
	other.Inc()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	lines, err := scrape(context.Background(), strings.TrimPrefix(srv.URL, "http://"), "junban_sqs_requests_total")
	if err != nil {
		t.Fatal(err)
	}
	got := map[sqsKey]float64{}
	for _, l := range lines {
		if l.name != "junban_sqs_requests_total" {
			t.Fatalf("scraped %s, not asked for", l.name)
		}
		got[sqsKey{role(l.labels["queue"], "bc1"), l.labels["action"], l.labels["error"]}] += l.value
	}
	want := map[sqsKey]float64{
		{"orders", "ReceiveMessage", ""}:              3,
		{"results", "SendMessageBatch", `odd "code"`}: 2,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// sqsRows turns two snapshots into requests per event and messages per request, failed
// requests counted in their row and apart.
func TestSQSRowsPerEvent(t *testing.T) {
	req0 := map[sqsKey]float64{{"orders", "ReceiveMessage", ""}: 10}
	req1 := map[sqsKey]float64{{"orders", "ReceiveMessage", ""}: 30, {"orders", "ReceiveMessage", "transport"}: 2}
	msg0 := map[sqsKey]float64{{"orders", "ReceiveMessage", ""}: 5}
	msg1 := map[sqsKey]float64{{"orders", "ReceiveMessage", ""}: 71}
	rows := sqsRows(req0, req1, msg0, msg1, 100)
	if len(rows) != 1 {
		t.Fatalf("rows %v, want one", rows)
	}
	r := rows[0]
	if r.Requests != 22 || r.Failed != 2 || r.PerEvent != 0.22 || r.Messages != 66 || r.MessagesPerRequest != 3 {
		t.Fatalf("row %+v", r)
	}
}

// Summarize gives each headline figure's median, range and the runs at or under its
// target (a run exactly at the target meets it), with an even number of runs too.
func TestSummarize(t *testing.T) {
	run := func(sqs, ow float64) *Result { return &Result{SQSPerEvent: sqs, OrderWorkerCPUMS: ow} }
	odd := Summarize([]*Result{run(1.2, 0.5), run(0.9, 0.3), run(1.0, 0.45)}, nil)
	if got := odd.Figures[0]; got.Median != 1.0 || got.Min != 0.9 || got.Max != 1.2 || got.Met != 2 || got.Target != 1.0 {
		t.Errorf("SQS over three runs: %+v, want median 1, range 0.9-1.2, 2 met", got)
	}
	if got := odd.Figures[1]; got.Median != 0.45 || got.Met != 1 {
		t.Errorf("order-worker CPU over three runs: %+v, want median 0.45, 1 met", got)
	}
	even := Summarize([]*Result{run(1.2, 0.5), run(0.9, 0.3)}, nil)
	if got := even.Figures[0]; got.Median != 1.05 || got.Met != 1 || even.Runs != 2 {
		t.Errorf("SQS over two runs: %+v, want median 1.05, 1 met", got)
	}
	if got := odd.Figures[1].SameSitting; got != nil {
		t.Errorf("ratios %+v without a baseline fleet", got)
	}
}

// With the baseline fleet's results of the same runs, each figure is also a ratio to the
// baseline of its own run (not to the baselines' median), and a ratio meets the issue's
// target over the baseline: the order-workers' 0.40 / 1.35 ms.
func TestSummarizeBesideTheBaseline(t *testing.T) {
	run := func(ow, redis float64) *Result { return &Result{OrderWorkerCPUMS: ow, RedisCPUMS: redis} }
	s := Summarize(
		[]*Result{run(0.5, 0.3), run(0.3, 0.2), run(0.6, 0.3)},
		[]*Result{run(2.0, 0.6), run(1.0, 0.4), run(1.5, 0.5)},
	)
	ow := s.Figures[1].SameSitting
	if ow == nil || !slices.Equal(ow.Baseline, []float64{2, 1, 1.5}) || !slices.Equal(ow.Ratios, []float64{0.25, 0.3, 0.4}) {
		t.Fatalf("order-workers beside the baseline: %+v, want ratios 0.25, 0.3, 0.4 to 2, 1, 1.5", ow)
	}
	if ow.Median != 0.3 || ow.Min != 0.25 || ow.Max != 0.4 || ow.Target != 0.296 || ow.Met != 1 {
		t.Errorf("order-workers' ratios: %+v, want median 0.3, range 0.25-0.4, target 0.296, 1 met", ow)
	}
	if r := s.Figures[3].SameSitting; r.Target != 0.278 || r.Met != 0 || r.Median != 0.5 {
		t.Errorf("Redis's ratios: %+v, want median 0.5, target 0.278, none met", r)
	}
	var out strings.Builder
	s.print(&out)
	if !strings.Contains(out.String(), "beside the baseline's fleet in the same runs") {
		t.Errorf("printed\n%s\nwithout the ratios", out.String())
	}
}

// A baseline that measured nothing (a persist-worker's CPU below /proc's 10 ms on a tiny
// load) gives no ratio rather than an infinite one, which --json could not encode; it is
// left out of the median and never counts as met.
func TestSummarizeBesideABaselineOfZero(t *testing.T) {
	run := func(pw float64) *Result { return &Result{PersistWorkerCPUMS: pw} }
	s := Summarize([]*Result{run(0.01), run(0.2)}, []*Result{run(0), run(0.8)})
	pw := s.Figures[2].SameSitting
	if !slices.Equal(pw.Ratios, []float64{0, 0.25}) || pw.Median != 0.25 || pw.Met != 1 {
		t.Fatalf("persist-worker beside a baseline of 0 then 0.8: %+v, want ratios 0 (none) and 0.25, median 0.25, 1 met", pw)
	}
	var out strings.Builder
	if err := writeJSON(&out, []*Result{run(0.01), run(0.2)}, []*Result{run(0), run(0.8)}); err != nil {
		t.Fatalf("--json beside a baseline of 0: %v", err)
	}
}

// The baseline's fleet goes first in every other run, from the first.
func TestBaselineFirstAlternates(t *testing.T) {
	if !BaselineFirst(0) || BaselineFirst(1) || !BaselineFirst(2) {
		t.Fatal("want the baseline first in runs 1 and 3, second in run 2")
	}
}

// An idle fleet's result counts its requests a minute and each process's CPU, and
// Redis's, in ms a second of the idle time.
func TestIdleResult(t *testing.T) {
	key := sqsKey{"orders", "ReceiveMessage", ""}
	before := &snapshot{
		cpu:      map[string]float64{"order-worker-0": 1.0, "persist-worker": 2.0},
		redisCPU: 10, requests: map[sqsKey]float64{key: 4}, messages: map[sqsKey]float64{},
	}
	after := &snapshot{
		cpu:      map[string]float64{"order-worker-0": 1.12, "persist-worker": 2.03},
		redisCPU: 10.6, requests: map[sqsKey]float64{key: 10}, messages: map[sqsKey]float64{},
	}
	r := newIdleResult(Options{Idle: 2 * time.Minute}, before, after).rounded()
	if r.Requests != 6 || r.RequestsPerMinute != 3 {
		t.Fatalf("requests %v, %v a minute; want 6, 3", r.Requests, r.RequestsPerMinute)
	}
	if w := map[string]float64{"order-worker-0": 1, "persist-worker": 0.25}; !maps.Equal(r.CPUMSPerS, w) {
		t.Fatalf("CPU %v ms a second, want %v", r.CPUMSPerS, w)
	}
	if r.RedisCPUMSPerS != 5 {
		t.Fatalf("Redis CPU %v ms a second, want 5", r.RedisCPUMSPerS)
	}
	var out strings.Builder
	r.print(&out)
	for _, want := range []string{"order-worker-0               1.0 ms of CPU a second", "Redis                        5.0 ms of CPU a second"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("printed\n%s\nwithout %q", out.String(), want)
		}
	}
}

// TestWorkloadTakesOnlyKindsEveryBaselineKnows: bench cost runs the same workload through a
// baseline fleet built from an older tree, which refuses a kind it does not know
// (ERR_UNKNOWN_TYPE) and so never reaches PostgreSQL with it.
func TestWorkloadTakesOnlyKindsEveryBaselineKnows(t *testing.T) {
	o := Defaults()
	o.Orders = 400
	w := loadgen.Generate(Spec("kinds", o))
	for _, e := range w.Events {
		if e.Type == event.OrderAllocationMoved {
			t.Fatalf("the workload sends %s (event %s): a baseline fleet without it refuses it", e.Type, e.EventID)
		}
	}
	if len(w.Events) == 0 {
		t.Fatal("the workload has no events")
	}
}
