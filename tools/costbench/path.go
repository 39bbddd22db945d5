package costbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
)

// A stage is one leg of an event's path whose time a worker's histogram holds.
type stage struct {
	// name is what the breakdown calls it; family the histogram (without _bucket) and
	// queue, when set, the role of the queue whose series it is ("orders", "results").
	name, family, queue string
}

// pathStages are the event's path in order, from the send of the event to the commit of
// its result. The order-workers' and the persist-worker's series are summed. A fleet
// whose binaries lack a histogram (an older tree) shows no figure for it.
var pathStages = []stage{
	{"in the orders queue (receive linger included)", "junban_queue_receive_age_seconds", "orders"},
	{"orders handler (submit; the step when the turn is free)", "junban_queue_handler_duration_seconds", "orders"},
	{"wait for the turn", "junban_lockhandoff_wait_seconds", ""},
	{"results send linger", "junban_queue_publish_linger_seconds", "results"},
	{"results send (linger and request)", "junban_queue_publish_seconds", "results"},
	{"in the results queue (receive linger included)", "junban_queue_receive_age_seconds", "results"},
	{"persist batch (receive to its transaction)", "junban_queue_batch_wait_seconds", "results"},
	{"commit (the batch's transaction)", "junban_persist_apply_duration_seconds", ""},
	{"processed -> committed (results send to commit)", "junban_persist_lag_seconds", ""},
}

// hist is one histogram's cumulative buckets (by upper bound), sum and count, summed
// over the processes.
type hist struct {
	buckets    map[float64]float64
	sum, count float64
}

// histKey names a histogram series: its family and its queue's role ("" for none).
type histKey struct{ family, queue string }

// addSample adds one /metrics line of a histogram family to hs.
func addSample(hs map[histKey]*hist, l line, family, suffix, queueRole string) {
	k := histKey{family, queueRole}
	h := hs[k]
	if h == nil {
		h = &hist{buckets: map[float64]float64{}}
		hs[k] = h
	}
	switch suffix {
	case "_bucket":
		le, err := strconv.ParseFloat(l.labels["le"], 64)
		if err != nil {
			return
		}
		h.buckets[le] += l.value
	case "_sum":
		h.sum += l.value
	case "_count":
		h.count += l.value
	}
}

// histSuffixes are a histogram family's series.
var histSuffixes = []string{"_bucket", "_sum", "_count"}

// pathSeries are the names scrape reads for the path's histograms.
func pathSeries() []string {
	var names []string
	for _, s := range pathStages {
		for _, suf := range histSuffixes {
			if n := s.family + suf; !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// pathFamily tells which path family and suffix a series name is of.
func pathFamily(name string) (family, suffix string, ok bool) {
	for _, s := range pathStages {
		for _, suf := range histSuffixes {
			if name == s.family+suf {
				return s.family, suf, true
			}
		}
	}
	return "", "", false
}

// Stage is one leg of the path over a run: how many observations, their mean, and the
// p50 and p99 interpolated within the buckets (as PromQL's histogram_quantile does).
type Stage struct {
	Name   string  `json:"name"`
	Metric string  `json:"metric"`
	Count  float64 `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// pathBreakdown is the path's stages between two snapshots; a stage without observations
// in the run (a histogram the fleet lacks) is left out.
func pathBreakdown(before, after *snapshot) []Stage {
	var out []Stage
	for _, s := range pathStages {
		k := histKey{s.family, s.queue}
		a := after.hists[k]
		if a == nil {
			continue
		}
		d := delta(a, before.hists[k])
		if d.count <= 0 {
			continue
		}
		metric := s.family
		if s.queue != "" {
			metric += `{queue="` + s.queue + `"}`
		}
		out = append(out, Stage{
			Name: s.name, Metric: metric, Count: d.count, MeanMS: d.sum / d.count * 1000,
			P50MS: d.quantile(0.5) * 1000, P99MS: d.quantile(0.99) * 1000,
		})
	}
	return out
}

// delta is a - b (b nil: a).
func delta(a, b *hist) *hist {
	d := &hist{buckets: map[float64]float64{}, sum: a.sum, count: a.count}
	for le, v := range a.buckets {
		d.buckets[le] = v
	}
	if b == nil {
		return d
	}
	d.sum -= b.sum
	d.count -= b.count
	for le, v := range b.buckets {
		d.buckets[le] -= v
	}
	return d
}

// quantile interpolates the q-quantile linearly within its bucket; one in the +Inf
// bucket is the largest finite bound.
func (h *hist) quantile(q float64) float64 {
	les := slices.Sorted(func(yield func(float64) bool) {
		for le := range h.buckets {
			if !yield(le) {
				return
			}
		}
	})
	if len(les) == 0 {
		return 0
	}
	total := h.buckets[les[len(les)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range les {
		c := h.buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if c == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(c-below)
		}
		lower, below = le, c
	}
	return lower
}

// printPath prints the breakdown of r beside base's (nil: none).
func printPath(w io.Writer, r, base *Result) {
	if len(r.Path) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwhere the time goes (the workers' histograms; mean / p50 / p99 ms)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "stage\tthis tree"
	if base != nil {
		header += "\tbaseline"
	}
	fmt.Fprintln(tw, header)
	cell := func(s *Stage) string {
		if s == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f / %.1f", s.MeanMS, s.P50MS, s.P99MS)
	}
	for _, st := range pathStages {
		mine := findStage(r.Path, st.name)
		var theirs *Stage
		if base != nil {
			theirs = findStage(base.Path, st.name)
		}
		if mine == nil && theirs == nil {
			continue
		}
		line := st.name + "\t" + cell(mine)
		if base != nil {
			line += "\t" + cell(theirs)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

func findStage(ss []Stage, name string) *Stage {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}
