package costbench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Figure is one headline figure over the runs: its median, its range, and in how many
// runs it met the target.
type Figure struct {
	Name   string    `json:"name"`
	Values []float64 `json:"values"`
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Target float64   `json:"target"`
	// Met counts the runs whose value was at most Target.
	Met int `json:"met"`
}

// Summary is the headline figures of several runs, in the order of the table.
type Summary struct {
	Runs    int      `json:"runs"`
	Figures []Figure `json:"figures"`
}

// Summarize returns the distribution of results' headline figures: SQS requests, the
// order-workers', the persist-worker's and Redis's CPU an event, and the in-turn p99
// (whose target is the baseline's worst, 247 ms: no worse).
func Summarize(results []*Result) Summary {
	figure := func(name string, target float64, of func(*Result) float64) Figure {
		f := Figure{Name: name, Target: target}
		for _, r := range results {
			v := of(r)
			f.Values = append(f.Values, round3(v))
			if v <= target {
				f.Met++
			}
		}
		sorted := slices.Sorted(slices.Values(f.Values))
		if n := len(sorted); n > 0 {
			f.Min, f.Max = sorted[0], sorted[n-1]
			f.Median = sorted[n/2]
			if n%2 == 0 {
				f.Median = round3((sorted[n/2-1] + sorted[n/2]) / 2)
			}
		}
		return f
	}
	return Summary{Runs: len(results), Figures: []Figure{
		figure("SQS requests", targetSQS, func(r *Result) float64 { return r.SQSPerEvent }),
		figure("order-worker CPU (all), ms", targetOrderCPU, func(r *Result) float64 { return r.OrderWorkerCPUMS }),
		figure("persist-worker CPU, ms", targetPersistCPU, func(r *Result) float64 { return r.PersistWorkerCPUMS }),
		figure("Redis server CPU, ms", targetRedisCPU, func(r *Result) float64 { return r.RedisCPUMS }),
		figure("in-turn p99, ms", baseP99High, func(r *Result) float64 { return r.InTurn.P99MS }),
	}}
}

func (s Summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nover %d runs, per distinct event\n", s.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\tmin - max\ttarget\truns that met it")
	for _, f := range s.Figures {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f - %.2f\t<= %.2f\t%d of %d\n", f.Name, f.Median, f.Min, f.Max, f.Target, f.Met, s.Runs)
	}
	tw.Flush()
}
