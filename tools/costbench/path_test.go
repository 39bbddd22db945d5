package costbench

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The breakdown reads the workers' histograms as the Prometheus client writes them, sums
// the processes' series, takes the run's delta, and interpolates the quantiles within
// the buckets; a stage the fleet has no histogram for is left out.
func TestPathBreakdown(t *testing.T) {
	newProc := func() (*prometheus.HistogramVec, string, func()) {
		reg := prometheus.NewRegistry()
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "junban_queue_receive_age_seconds", Help: "h", Buckets: []float64{0.01, 0.02, 0.04},
		}, []string{"queue"})
		reg.MustRegister(v)
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		return v, strings.TrimPrefix(srv.URL, "http://"), srv.Close
	}
	v0, addr0, close0 := newProc()
	defer close0()
	v1, addr1, close1 := newProc()
	defer close1()
	snap := func() *snapshot {
		s := &snapshot{hists: map[histKey]*hist{}}
		for _, addr := range []string{addr0, addr1} {
			lines, err := scrape(context.Background(), addr, pathSeries()...)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lines {
				family, suffix, ok := pathFamily(l.name)
				if !ok {
					t.Fatalf("scraped %s, not a path series", l.name)
				}
				addSample(s.hists, l, family, suffix, role(l.labels["queue"], "bc1"))
			}
		}
		return s
	}
	// Before the run: observations the delta must leave out.
	for range 50 {
		v0.WithLabelValues("bc1-orders").Observe(0.035)
	}
	before := snap()
	// The run: 100 on orders, 90 in the first bucket (one process), 10 in the second
	// (the other); 4 on results in the +Inf bucket.
	for range 90 {
		v0.WithLabelValues("bc1-orders").Observe(0.005)
	}
	for range 10 {
		v1.WithLabelValues("bc1-orders").Observe(0.015)
	}
	for range 4 {
		v1.WithLabelValues("bc1-results").Observe(1)
	}
	after := snap()

	path := pathBreakdown(before, after)
	if len(path) != 2 {
		t.Fatalf("%d stages, want the orders and results queues': %+v", len(path), path)
	}
	o, r := path[0], path[1]
	if o.Metric != `junban_queue_receive_age_seconds{queue="orders"}` || o.Count != 100 {
		t.Fatalf("orders stage %+v", o)
	}
	// p50: rank 50 of 90 in [0, 10 ms]; p99: rank 99, 9 of 10 into [10, 20 ms].
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	if want := 50.0 / 90 * 10; !near(o.P50MS, want) {
		t.Errorf("orders p50 %v ms, want %v", o.P50MS, want)
	}
	if !near(o.P99MS, 19) {
		t.Errorf("orders p99 %v ms, want 19", o.P99MS)
	}
	if want := (90*0.005 + 10*0.015) / 100 * 1000; !near(o.MeanMS, want) {
		t.Errorf("orders mean %v ms, want %v", o.MeanMS, want)
	}
	if r.Metric != `junban_queue_receive_age_seconds{queue="results"}` || r.Count != 4 || r.P99MS != 40 {
		t.Errorf("results stage %+v: want 4 observations, p99 at the largest bound (40 ms)", r)
	}

	var out strings.Builder
	printPath(&out, &Result{Path: path}, &Result{})
	for _, want := range []string{"in the orders queue", "6.0 / 5.6 / 19.0", "-"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed\n%s\nwithout %q", out.String(), want)
		}
	}
}
