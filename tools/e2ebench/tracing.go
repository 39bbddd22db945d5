package e2ebench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/junban/junban/internal/testenv/fleet"
	"github.com/junban/junban/tools/otlpsink"
)

// procCPU is one process's CPU seconds over a measurement.
type procCPU struct {
	Name    string
	Seconds float64
}

// cpuSeconds reads each process's process_cpu_seconds_total (user and system time, which
// the Prometheus process collector reads from /proc/<pid>/stat).
func cpuSeconds(ctx context.Context, procs []*fleet.Proc) ([]float64, error) {
	out := make([]float64, len(procs))
	for i, p := range procs {
		v, err := p.Metric(ctx, "process_cpu_seconds_total")
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// tracingRun is one measurement of runTracing with what its receiver got.
type tracingRun struct {
	f *figures
	// spans and requests are what the OTLP receiver got; 0 with tracing off.
	spans, requests int64
}

// events counts the distinct events of both phases, the span and CPU figures' denominator.
func (r tracingRun) events() int { return r.f.s.Distinct + r.f.ls.Distinct }

func (r tracingRun) cpuPer1000() map[string]float64 {
	out := map[string]float64{}
	for _, c := range r.f.cpu {
		out[c.Name] = c.Seconds * 1000 / float64(max(r.events(), 1))
	}
	return out
}

func (r tracingRun) json() map[string]any {
	out := r.f.json()
	per := r.cpuPer1000()
	for k, v := range per {
		per[k] = float64(int64(v*1000+0.5)) / 1000
	}
	out["cpu_s_per_1000_events"] = per
	out["spans"], out["export_requests"] = r.spans, r.requests
	out["spans_per_event"] = float64(int64(float64(r.spans)/float64(max(r.events(), 1))*100+0.5)) / 100
	return out
}

// runTracing measures the same workload twice in one sitting, tracing off (no inherited
// OTEL_* variable reaches the fleet) and then on (the fleet sends every span, sampler
// always_on, to an OTLP/HTTP receiver in this process), and prints both side by side.
func runTracing(ctx context.Context, cfg Config, o Options, w io.Writer) error {
	say := func(msg string) {
		if !o.JSON {
			fmt.Fprintln(os.Stderr, msg)
		}
	}
	o.dropEnv = append(slices.Clone(o.dropEnv), "OTEL_")
	say("bench e2e: run 1 of 2: tracing off (no OTEL_* variable reaches the fleet)")
	off, err := measure(ctx, cfg, o, false, 0)
	if err != nil {
		return err
	}
	sink, err := otlpsink.Start()
	if err != nil {
		return err
	}
	defer sink.Close()
	o.env = append(slices.Clone(o.env), "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.Endpoint(), "OTEL_TRACES_SAMPLER=always_on")
	say("bench e2e: run 2 of 2: tracing on (every span to an OTLP receiver at " + sink.Endpoint() + "), the same workload")
	// The second run takes the first's ceiling, so that both send the same orders.
	onF, err := measure(ctx, cfg, o, false, off.ceiling)
	if err != nil {
		return err
	}
	// measure has stopped the fleet, and each process flushed its spans as it stopped.
	on := tracingRun{f: onF, spans: sink.Spans(), requests: sink.Requests()}
	if on.spans == 0 {
		return fmt.Errorf("bench e2e: tracing on, but the receiver got no span (%d requests rejected)", sink.Rejected())
	}
	if o.JSON {
		return json.NewEncoder(w).Encode(map[string]any{"tracing_off": tracingRun{f: off}.json(), "tracing_on": on.json()})
	}
	printTracing(w, tracingRun{f: off}, on)
	return nil
}

// printTracing writes the two measurements, tracing off and on, a column each.
func printTracing(w io.Writer, off, on tracingRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ttracing off\ttracing on")
	row := func(name string, f func(tracingRun) string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(off), f(on)) }
	row("events (distinct, both phases)", func(r tracingRun) string { return fmt.Sprint(r.events()) })
	row("events/s send -> commit", func(r tracingRun) string { return fmt.Sprintf("%.1f", r.f.s.EventsPerS) })
	row("latency rate events/s", func(r tracingRun) string { return fmt.Sprintf("%.0f", r.f.latRate) })
	row("  in turn p50 / p99", func(r tracingRun) string {
		return fmt.Sprintf("%.0f / %.0f ms", r.f.inTurn.P50MS, r.f.inTurn.P99MS)
	})
	for _, c := range off.f.cpu {
		row("CPU s / 1000 events "+c.Name, func(r tracingRun) string { return fmt.Sprintf("%.3f", r.cpuPer1000()[c.Name]) })
	}
	row("CPU s / 1000 events, all", func(r tracingRun) string {
		sum := 0.0
		for _, v := range r.cpuPer1000() {
			sum += v
		}
		return fmt.Sprintf("%.3f", sum)
	})
	row("spans per event", func(r tracingRun) string { return fmt.Sprintf("%.2f", float64(r.spans)/float64(max(r.events(), 1))) })
	row("spans / export requests", func(r tracingRun) string { return fmt.Sprintf("%d / %d", r.spans, r.requests) })
	tw.Flush()
}
