package costbench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/tools/sendlatency"
)

// Result is what the load phase cost, per distinct event.
type Result struct {
	Rate            float64 `json:"rate_offered_events_per_s"`
	Orders          int     `json:"orders"`
	SKUs            int     `json:"skus"`
	OrderWorkers    int     `json:"order_workers"`
	Events          int     `json:"events_distinct"`
	Sent            int     `json:"events_sent"`
	ElapsedS        float64 `json:"elapsed_s"`
	EventsPerS      float64 `json:"events_per_s"`
	SQSMessagesSeen float64 `json:"sqs_messages_received"`

	// CPUMS is each process's CPU milliseconds per event.
	CPUMS map[string]float64 `json:"cpu_ms_per_event"`
	// OrderWorkerCPUMS is the order-workers' together, PersistWorkerCPUMS the persist-worker's.
	OrderWorkerCPUMS   float64 `json:"order_worker_cpu_ms_per_event"`
	PersistWorkerCPUMS float64 `json:"persist_worker_cpu_ms_per_event"`
	// Switches is each process's context switches per event (its threads' wake-ups, from
	// /proc; absent where /proc cannot tell); OrderWorkerSwitches the order-workers'
	// together, PersistWorkerSwitches the persist-worker's.
	Switches              map[string]float64 `json:"context_switches_per_event,omitempty"`
	OrderWorkerSwitches   float64            `json:"order_worker_context_switches_per_event,omitempty"`
	PersistWorkerSwitches float64            `json:"persist_worker_context_switches_per_event,omitempty"`

	RedisCPUMS    float64 `json:"redis_cpu_ms_per_event"`
	RedisCommands float64 `json:"redis_commands_per_event"`
	RedisEvalsha  float64 `json:"redis_evalsha_per_event"`
	// RedisTop are the commands with the most calls per event.
	RedisTop []Count `json:"redis_commands_top"`

	// SQS is one row per queue and action; SQSPerEvent is the requests of all of them.
	SQS         []SQSRow `json:"sqs"`
	SQSPerEvent float64  `json:"sqs_requests_per_event"`
	SQSFailed   float64  `json:"sqs_requests_failed"`
	// Producer is the sends of the benchmark's own producer: the shop's cost, not junban's.
	Producer []SQSRow `json:"sqs_producer"`

	// PGXactsPerEvent is the persist-worker's transactions (its batches) per event.
	PGXactsPerEvent float64 `json:"pg_transactions_per_event"`
	PGRowsPerEvent  float64 `json:"pg_rows_written_per_event"`
	PGInserted      float64 `json:"pg_rows_inserted"`
	PGUpdated       float64 `json:"pg_rows_updated"`
	PGDeleted       float64 `json:"pg_rows_deleted"`
	// PGCPUMS is the PostgreSQL server's CPU per event, every process of it (pgServerCPU);
	// nil when the server is not on this host.
	PGCPUMS *float64 `json:"pg_cpu_ms_per_event,omitempty"`

	InTurn sendlatency.Stats `json:"in_turn"`
	// Path is where an event's time went, stage by stage (pathStages).
	Path []Stage `json:"path,omitempty"`

	Idle *IdleResult `json:"idle,omitempty"`
}

// Count is a name and its calls per event.
type Count struct {
	Name     string  `json:"name"`
	PerEvent float64 `json:"per_event"`
}

// SQSRow is one queue's one action.
type SQSRow struct {
	Queue              string  `json:"queue"`
	Action             string  `json:"action"`
	Requests           float64 `json:"requests"`
	Failed             float64 `json:"failed"`
	PerEvent           float64 `json:"requests_per_event,omitempty"` // not for the idle fleet
	Messages           float64 `json:"messages"`
	MessagesPerRequest float64 `json:"messages_per_request"`
}

// IdleResult is what an idle fleet costs: its SQS requests and its CPU.
type IdleResult struct {
	Seconds           float64  `json:"seconds"`
	WaitSeconds       int      `json:"sqs_wait_seconds"`
	Requests          float64  `json:"requests"`
	RequestsPerMinute float64  `json:"requests_per_minute"`
	SQS               []SQSRow `json:"sqs"`
	// CPUMSPerS is each process's CPU over the idle time, in ms a second; RedisCPUMSPerS
	// the Redis server's (whatever else used it counts too).
	CPUMSPerS      map[string]float64 `json:"cpu_ms_per_s"`
	RedisCPUMSPerS float64            `json:"redis_cpu_ms_per_s"`
	// PGCPUMSPerS is the PostgreSQL server's; nil when it is not on this host.
	PGCPUMSPerS *float64 `json:"pg_cpu_ms_per_s,omitempty"`
}

func newResult(o Options, s loadgen.Summary, before, after *snapshot, inTurn sendlatency.Stats) *Result {
	n := float64(max(s.Distinct, 1))
	r := &Result{
		Rate: o.Rate, Orders: s.Orders, SKUs: s.SKUs, OrderWorkers: o.Workers,
		Events: s.Distinct, Sent: s.Sent, ElapsedS: s.ElapsedS, EventsPerS: s.EventsPerS,
		CPUMS: map[string]float64{}, InTurn: inTurn, Path: pathBreakdown(before, after),
	}
	for name, v := range after.cpu {
		ms := (v - before.cpu[name]) * 1000 / n
		r.CPUMS[name] = ms
		if strings.HasPrefix(name, "order-worker") {
			r.OrderWorkerCPUMS += ms
		} else {
			r.PersistWorkerCPUMS += ms
		}
	}
	for name, v := range after.switches {
		b, ok := before.switches[name]
		if !ok {
			continue
		}
		if r.Switches == nil {
			r.Switches = map[string]float64{}
		}
		d := (v - b) / n
		r.Switches[name] = d
		if strings.HasPrefix(name, "order-worker") {
			r.OrderWorkerSwitches += d
		} else {
			r.PersistWorkerSwitches += d
		}
	}
	r.RedisCPUMS = (after.redisCPU - before.redisCPU) * 1000 / n
	for cmd, v := range after.redisCalls {
		d := (v - before.redisCalls[cmd]) / n
		if d <= 0 {
			continue
		}
		r.RedisCommands += d
		r.RedisTop = append(r.RedisTop, Count{cmd, d})
	}
	r.RedisEvalsha = (after.redisCalls["evalsha"] - before.redisCalls["evalsha"]) / n
	slices.SortFunc(r.RedisTop, func(a, b Count) int { return cmp.Compare(b.PerEvent, a.PerEvent) })
	r.RedisTop = r.RedisTop[:min(len(r.RedisTop), 8)]
	r.SQS = sqsRows(before.requests, after.requests, before.messages, after.messages, n)
	r.Producer = sqsRows(before.producerRequests, after.producerRequests, before.producerMessages, after.producerMessages, n)
	for _, row := range r.SQS {
		r.SQSPerEvent += row.PerEvent
		r.SQSFailed += row.Failed
		if row.Action == "ReceiveMessage" {
			r.SQSMessagesSeen += row.Messages
		}
	}
	pg0, pg1 := before.pg, after.pg
	r.PGInserted, r.PGUpdated, r.PGDeleted = pg1.TupInserted-pg0.TupInserted, pg1.TupUpdated-pg0.TupUpdated, pg1.TupDeleted-pg0.TupDeleted
	r.PGXactsPerEvent = (after.batches - before.batches) / n
	r.PGRowsPerEvent = (r.PGInserted + r.PGUpdated + r.PGDeleted) / n
	r.PGCPUMS = pgCPUDelta(before, after, n)
	return r
}

func newIdleResult(o Options, before, after *snapshot) *IdleResult {
	r := &IdleResult{Seconds: o.Idle.Seconds(), WaitSeconds: 20, SQS: sqsRows(before.requests, after.requests, before.messages, after.messages, 1)}
	for i, row := range r.SQS {
		r.Requests += row.Requests
		r.SQS[i].PerEvent = 0 // no events
	}
	r.RequestsPerMinute = r.Requests / o.Idle.Minutes()
	r.CPUMSPerS = map[string]float64{}
	for name, v := range after.cpu {
		r.CPUMSPerS[name] = (v - before.cpu[name]) * 1000 / o.Idle.Seconds()
	}
	r.RedisCPUMSPerS = (after.redisCPU - before.redisCPU) * 1000 / o.Idle.Seconds()
	r.PGCPUMSPerS = pgCPUDelta(before, after, o.Idle.Seconds())
	return r
}

// pgCPUDelta is the PostgreSQL server's CPU between two snapshots in ms, per n (events
// or seconds); nil unless both read it.
func pgCPUDelta(before, after *snapshot, n float64) *float64 {
	if !before.pgLocal || !after.pgLocal {
		return nil
	}
	v := (after.pgCPU - before.pgCPU) * 1000 / n
	return &v
}

// sqsRows are the deltas of the SQS counters by queue and action, per n events.
func sqsRows(req0, req1, msg0, msg1 map[sqsKey]float64, n float64) []SQSRow {
	rows := map[[2]string]*SQSRow{}
	row := func(k sqsKey) *SQSRow {
		id := [2]string{k.Role, k.Action}
		if rows[id] == nil {
			rows[id] = &SQSRow{Queue: k.Role, Action: k.Action}
		}
		return rows[id]
	}
	for k, v := range req1 {
		d := v - req0[k]
		if d <= 0 {
			continue
		}
		r := row(k)
		r.Requests += d
		if k.Error != "" {
			r.Failed += d
		}
	}
	for k, v := range msg1 {
		if d := v - msg0[k]; d > 0 {
			row(k).Messages += d
		}
	}
	out := make([]SQSRow, 0, len(rows))
	for _, id := range slices.SortedFunc(maps.Keys(rows), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		r := rows[id]
		r.PerEvent = r.Requests / n
		if r.Requests > 0 {
			r.MessagesPerRequest = r.Messages / r.Requests
		}
		out = append(out, *r)
	}
	return out
}

// The table: what one event cost before (measured the same way at the same load)
// and what it should cost.
const (
	baseSQS, targetSQS, floorSQS         = 4.2, 1.0, 0.6
	baseOrderCPU, targetOrderCPU         = 1.35, 0.4
	basePersistCPU, targetPersistCPU     = 0.79, 0.2
	baseRedisCPU, targetRedisCPU         = 0.54, 0.15
	baseEvalsha, baseRedisCommands       = 5.7, 39.5
	baseP99Low, baseP99High              = 166, 247
	idleBaselineNote                     = "an idle receiver long-polls 3 times a minute at 20 s"
	sqsListPricePerMillion, fifoPerMilli = 0.40, 0.50
)

// rounded is r with every figure rounded to 3 decimals, for --json.
func (r *Result) rounded() *Result {
	c := *r
	for _, f := range []*float64{&c.ElapsedS, &c.EventsPerS, &c.OrderWorkerCPUMS, &c.PersistWorkerCPUMS, &c.RedisCPUMS,
		&c.RedisCommands, &c.RedisEvalsha, &c.SQSPerEvent, &c.PGXactsPerEvent, &c.PGRowsPerEvent,
		&c.OrderWorkerSwitches, &c.PersistWorkerSwitches} {
		*f = round3(*f)
	}
	c.CPUMS, c.Switches, c.PGCPUMS = roundMap(r.CPUMS), roundMap(r.Switches), roundPtr(r.PGCPUMS)
	c.RedisTop = slices.Clone(r.RedisTop)
	for i := range c.RedisTop {
		c.RedisTop[i].PerEvent = round3(c.RedisTop[i].PerEvent)
	}
	c.SQS, c.Producer = roundRows(r.SQS), roundRows(r.Producer)
	c.Path = slices.Clone(r.Path)
	for i := range c.Path {
		p := &c.Path[i]
		p.MeanMS, p.P50MS, p.P99MS = round3(p.MeanMS), round3(p.P50MS), round3(p.P99MS)
	}
	if r.Idle != nil {
		c.Idle = r.Idle.rounded()
	}
	return &c
}

// rounded is i with every figure rounded to 3 decimals, for --json.
func (i *IdleResult) rounded() *IdleResult {
	c := *i
	c.RequestsPerMinute, c.SQS = round3(c.RequestsPerMinute), roundRows(c.SQS)
	c.RedisCPUMSPerS, c.PGCPUMSPerS, c.CPUMSPerS = round3(c.RedisCPUMSPerS), roundPtr(i.PGCPUMSPerS), roundMap(i.CPUMSPerS)
	return &c
}

// roundPtr is *f rounded to 3 decimals, in a new variable (nil for nil).
func roundPtr(f *float64) *float64 {
	if f == nil {
		return nil
	}
	v := round3(*f)
	return &v
}

// roundMap is m with every figure rounded to 3 decimals (nil for nil).
func roundMap(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = round3(v)
	}
	return out
}

func roundRows(rows []SQSRow) []SQSRow {
	out := slices.Clone(rows)
	for i := range out {
		out[i].PerEvent, out[i].MessagesPerRequest = round3(out[i].PerEvent), round3(out[i].MessagesPerRequest)
	}
	return out
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// writeJSON prints one object: the run's "result" (with more than one run, "runs" and
// their "summary" instead), beside the "baseline" and "target"; with a baseline
// fleet, its "baseline_result" (or "baseline_runs") and the "summary" with the ratios.
func writeJSON(w io.Writer, results, baselines []*Result) error {
	out := map[string]any{
		"baseline": map[string]any{
			"sqs_requests_per_event": baseSQS, "order_worker_cpu_ms_per_event": baseOrderCPU,
			"persist_worker_cpu_ms_per_event": basePersistCPU, "redis_cpu_ms_per_event": baseRedisCPU,
			"redis_evalsha_per_event": baseEvalsha, "redis_commands_per_event": baseRedisCommands,
			"in_turn_p99_ms": []float64{baseP99Low, baseP99High},
		},
		"target": map[string]any{
			"sqs_requests_per_event": targetSQS, "sqs_requests_per_event_floor": floorSQS,
			"order_worker_cpu_ms_per_event": targetOrderCPU, "persist_worker_cpu_ms_per_event": targetPersistCPU,
			"redis_cpu_ms_per_event": targetRedisCPU, "in_turn_p99_ms": "no worse than the baseline",
		},
	}
	rounded := func(rs []*Result) []*Result {
		out := make([]*Result, len(rs))
		for i, r := range rs {
			out[i] = r.rounded()
		}
		return out
	}
	if len(results) == 1 {
		out["result"] = results[0].rounded()
		if len(baselines) == 1 {
			out["baseline_result"] = baselines[0].rounded()
		}
	} else {
		out["runs"] = rounded(results)
		if baselines != nil {
			out["baseline_runs"] = rounded(baselines)
		}
	}
	if len(results) > 1 || baselines != nil {
		out["summary"] = Summarize(results, baselines)
	}
	return json.NewEncoder(w).Encode(out)
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "load: %d orders, %d SKUs, %.0f events/s offered, %d order-workers and a persist-worker, JUNBAN_SQS_WAIT_SECONDS=1\n",
		r.Orders, r.SKUs, r.Rate, r.OrderWorkers)
	fmt.Fprintf(w, "events: %d distinct (%d sent with duplicates) in %.1f s, %.1f events/s; %.0f messages received over both queues\n\n",
		r.Events, r.Sent, r.ElapsedS, r.EventsPerS, r.SQSMessagesSeen)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "per distinct event\tmeasured\tbaseline (issue 34)\ttarget")
	row := func(name, measured, base, target string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, measured, base, target)
	}
	row("SQS requests", f2(r.SQSPerEvent), f2(baseSQS), fmt.Sprintf("<= %.1f (floor %.1f)", targetSQS, floorSQS))
	for _, s := range r.SQS {
		row("  "+s.Queue+" "+s.Action, fmt.Sprintf("%s (%.1f messages each)", f2(s.PerEvent), s.MessagesPerRequest), "", "")
	}
	if r.SQSFailed > 0 {
		row("  failed (in the above)", fmt.Sprintf("%.0f requests", r.SQSFailed), "", "")
	}
	for _, s := range r.Producer {
		row("  (producer, not junban) "+s.Queue+" "+s.Action, fmt.Sprintf("%s (%.1f messages each)", f2(s.PerEvent), s.MessagesPerRequest), "", "")
	}
	row("order-worker CPU (all)", ms(r.OrderWorkerCPUMS), ms(baseOrderCPU), "<= "+ms(targetOrderCPU))
	for _, name := range slices.Sorted(maps.Keys(r.CPUMS)) {
		if strings.HasPrefix(name, "order-worker") {
			row("  "+name, ms(r.CPUMS[name]), "", "")
		}
	}
	row("persist-worker CPU", ms(r.PersistWorkerCPUMS), ms(basePersistCPU), "<= "+ms(targetPersistCPU))
	if r.Switches != nil {
		row("context switches, order-workers (all)", f2(r.OrderWorkerSwitches), "", "")
		row("context switches, persist-worker", f2(r.PersistWorkerSwitches), "", "")
	}
	row("Redis server CPU", ms(r.RedisCPUMS), ms(baseRedisCPU), "<= "+ms(targetRedisCPU))
	row("  Redis commands", f2(r.RedisCommands), fmt.Sprint(baseRedisCommands), "")
	row("  EVALSHA", f2(r.RedisEvalsha), fmt.Sprint(baseEvalsha), "")
	for _, c := range r.RedisTop {
		row("    "+c.Name, f2(c.PerEvent), "", "")
	}
	batches := f2(r.PGXactsPerEvent)
	if r.PGXactsPerEvent > 0 {
		batches += fmt.Sprintf(" (%.1f events each)", 1/r.PGXactsPerEvent)
	}
	row("PostgreSQL transactions (persist-worker batches)", batches, "", "")
	row("PostgreSQL rows written", fmt.Sprintf("%s (%.0f inserted, %.0f updated, %.0f deleted)", f2(r.PGRowsPerEvent), r.PGInserted, r.PGUpdated, r.PGDeleted), "", "")
	if r.PGCPUMS != nil {
		row("PostgreSQL server CPU", ms(*r.PGCPUMS), "", "")
	} else {
		row("PostgreSQL server CPU", "not on this host", "", "")
	}
	row("in-turn send -> commit p50 / p99", fmt.Sprintf("%.0f / %.0f ms", r.InTurn.P50MS, r.InTurn.P99MS),
		fmt.Sprintf("p99 %d-%d ms", baseP99Low, baseP99High), "no worse")
	tw.Flush()
	fmt.Fprintf(w, "\nSQS bill at the list price, per million distinct events: $%.2f standard ($%.2f FIFO)\n",
		r.SQSPerEvent*sqsListPricePerMillion, r.SQSPerEvent*fifoPerMilli)
	if r.Idle != nil {
		r.Idle.print(w)
	}
}

func (i *IdleResult) print(w io.Writer) {
	fmt.Fprintf(w, "\nidle fleet, JUNBAN_SQS_WAIT_SECONDS=%d, %s: %.0f requests, %.1f a minute (%s)\n",
		i.WaitSeconds, time.Duration(i.Seconds*float64(time.Second)), i.Requests, i.RequestsPerMinute, idleBaselineNote)
	for _, s := range i.SQS {
		fmt.Fprintf(w, "  %-28s %.1f a minute\n", s.Queue+" "+s.Action, s.Requests*60/math.Max(i.Seconds, 1e-9))
	}
	fmt.Fprintf(w, "  a month: %.0f requests, $%.2f at $%.2f per million\n",
		i.RequestsPerMinute*60*24*30, i.RequestsPerMinute*60*24*30*sqsListPricePerMillion/1e6, sqsListPricePerMillion)
	names := slices.Sorted(maps.Keys(i.CPUMSPerS))
	for _, name := range names {
		fmt.Fprintf(w, "  %-28s %.1f ms of CPU a second\n", name, i.CPUMSPerS[name])
	}
	fmt.Fprintf(w, "  %-28s %.1f ms of CPU a second (the whole server's)\n", "Redis", i.RedisCPUMSPerS)
	if i.PGCPUMSPerS != nil {
		fmt.Fprintf(w, "  %-28s %.1f ms of CPU a second (the whole server's)\n", "PostgreSQL", *i.PGCPUMSPerS)
	}
}

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func ms(v float64) string { return fmt.Sprintf("%.2f ms", v) }
