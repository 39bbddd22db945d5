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
	// SameSitting is the figure beside the baseline's fleet measured in the same runs
	// (Options.BaselineBin); nil without one.
	SameSitting *Ratio `json:"same_sitting,omitempty"`
}

// Ratio is a figure as a ratio to the baseline's, run by run: the machine's speed and
// hour move both fleets' CPU an event alike, so the ratio of one sitting is what the code
// changed, as far as the machine held still between a pair's halves, and the issue's
// target reads as a ratio to the issue's own baseline on any machine.
type Ratio struct {
	// Baseline is the baseline fleet's value in each run, Ratios each run's value over it
	// (0 where the baseline's is 0: no ratio, left out of Median, Min and Max).
	Baseline []float64 `json:"baseline_values"`
	Ratios   []float64 `json:"ratios"`
	Median   float64   `json:"median_ratio"`
	Min      float64   `json:"min_ratio"`
	Max      float64   `json:"max_ratio"`
	// Target is the target over the baseline (1 for the p99: no worse);
	// Met counts the runs whose ratio was at most Target.
	Target float64 `json:"target_ratio"`
	Met    int     `json:"met"`
}

// Summary is the headline figures of several runs, in the order of the table.
type Summary struct {
	Runs    int      `json:"runs"`
	Figures []Figure `json:"figures"`
}

// Summarize returns the distribution of results' headline figures: SQS requests, the
// order-workers', the persist-worker's and Redis's CPU an event, and the in-turn p99
// (whose target is the baseline's worst, 247 ms: no worse). baselines, when given, are
// the baseline fleet's results of the same runs, in the same order: each figure then
// carries its ratios to them (Ratio).
func Summarize(results, baselines []*Result) Summary {
	figure := func(name string, target, base float64, of func(*Result) float64) Figure {
		f := Figure{Name: name, Target: target}
		f.Values, f.Met = values(results, of, target)
		f.Median, f.Min, f.Max = spread(f.Values)
		if len(baselines) == len(results) && len(baselines) > 0 {
			rt := &Ratio{Target: round3(target / base)}
			rt.Baseline, _ = values(baselines, of, 0)
			var measured []float64
			for i, r := range results {
				b := of(baselines[i])
				if b <= 0 { // the baseline measured nothing: no ratio
					rt.Ratios = append(rt.Ratios, 0)
					continue
				}
				ratio := of(r) / b
				rt.Ratios = append(rt.Ratios, round3(ratio))
				measured = append(measured, round3(ratio))
				if ratio <= target/base {
					rt.Met++
				}
			}
			rt.Median, rt.Min, rt.Max = spread(measured)
			f.SameSitting = rt
		}
		return f
	}
	return Summary{Runs: len(results), Figures: []Figure{
		figure("SQS requests", targetSQS, baseSQS, func(r *Result) float64 { return r.SQSPerEvent }),
		figure("order-worker CPU (all), ms", targetOrderCPU, baseOrderCPU, func(r *Result) float64 { return r.OrderWorkerCPUMS }),
		figure("persist-worker CPU, ms", targetPersistCPU, basePersistCPU, func(r *Result) float64 { return r.PersistWorkerCPUMS }),
		figure("Redis server CPU, ms", targetRedisCPU, baseRedisCPU, func(r *Result) float64 { return r.RedisCPUMS }),
		figure("in-turn p99, ms", baseP99High, baseP99High, func(r *Result) float64 { return r.InTurn.P99MS }),
	}}
}

// values is of over results, rounded, and how many were at most target.
func values(results []*Result, of func(*Result) float64, target float64) (vs []float64, met int) {
	for _, r := range results {
		v := of(r)
		vs = append(vs, round3(v))
		if v <= target {
			met++
		}
	}
	return vs, met
}

// spread is the median, the least and the greatest of vs (zeros for none).
func spread(vs []float64) (median, lo, hi float64) {
	sorted := slices.Sorted(slices.Values(vs))
	n := len(sorted)
	if n == 0 {
		return 0, 0, 0
	}
	median = sorted[n/2]
	if n%2 == 0 {
		median = round3((sorted[n/2-1] + sorted[n/2]) / 2)
	}
	return median, sorted[0], sorted[n-1]
}

func (s Summary) print(w io.Writer) {
	fmt.Fprintf(w, "\nover %d runs, per distinct event\n", s.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmedian\tmin - max\ttarget\truns that met it")
	for _, f := range s.Figures {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f - %.2f\t<= %.2f\t%d of %d\n", f.Name, f.Median, f.Min, f.Max, f.Target, f.Met, s.Runs)
	}
	tw.Flush()
	if len(s.Figures) == 0 || s.Figures[0].SameSitting == nil {
		return
	}
	fmt.Fprintf(w, "\nbeside the baseline's fleet in the same runs: this tree's figure over the baseline's\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tbaseline's median\tratio median\tmin - max\ttarget ratio\truns that met it")
	for _, f := range s.Figures {
		r := f.SameSitting
		base, _, _ := spread(r.Baseline)
		fmt.Fprintf(tw, "%s\t%.2f\t%.3f\t%.3f - %.3f\t<= %.3f\t%d of %d\n", f.Name, base, r.Median, r.Min, r.Max, r.Target, r.Met, s.Runs)
	}
	tw.Flush()
}
