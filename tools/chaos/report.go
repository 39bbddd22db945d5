package chaos

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// Report is what a chaos run did and found. The first eight fields are the contract of
// `junbanlab chaos --json`; every count must be 0 and Conserved true (see OK).
type Report struct {
	// Events is the number of events sent, duplicates included.
	Events int `json:"events"`
	// Kills counts the SIGKILLs of worker processes (order-workers and persist-worker).
	Kills int `json:"kills"`
	// Lost counts distinct events sent without an inbox row in PostgreSQL.
	Lost int `json:"lost"`
	// DoubleApplied counts entities whose turns show an extra application (a seq gap)
	// plus lot buckets that hold more or less than the orders record.
	DoubleApplied int `json:"double_applied"`
	// Drift counts the entities persist.Reconcile finds differing between Redis and
	// PostgreSQL.
	Drift int `json:"drift"`
	// Oversold counts SKUs holding more than they had, in Redis or in PostgreSQL.
	Oversold int `json:"oversold"`
	// Conserved is true when every lot, in both stores, sums to what was imported (plus
	// what came from outside or by a transfer), has no negative bucket, and matches its
	// imported quantity plus the moves ledger; and every SKU's transfer moves net to zero.
	Conserved bool `json:"conserved"`
	// RedisFailovers counts the promotions of a replica that the Redis Cluster
	// scenario caused: a master SIGKILLed, its replica master of its slots in CLUSTER
	// NODES and the slots answering again. It must equal RedisMasterKills.
	RedisFailovers int `json:"redis_failovers"`

	// RedisCluster is true for the Redis Cluster failover scenario.
	RedisCluster bool `json:"redis_cluster"`
	// RedisMasterKills counts the SIGKILLs of a cluster master.
	RedisMasterKills int `json:"redis_master_kills"`
	// ReplicaLagS is how long the victim's replica was stopped before each master kill.
	ReplicaLagS float64 `json:"replica_lag_s"`
	// FailoverS is, per failover, the seconds from the kill until the slots answered.
	FailoverS []float64 `json:"failover_s,omitempty"`
	// MinRedisReplicas is the JUNBAN_REDIS_MIN_REPLICAS the order-workers ran with, and
	// MinRedisReplicasKnown whether their binary reads it at all.
	MinRedisReplicas      int  `json:"min_redis_replicas"`
	MinRedisReplicasKnown bool `json:"min_redis_replicas_known"`
	// EventsPerS is events sent per second from the first send until the fleet had
	// nothing left to do (quiescence, or the idle stretch a run with lost events gave
	// up after): the send rate (Config.SendDuration) while the fleet keeps up, less
	// when it falls behind.
	EventsPerS float64 `json:"events_per_s"`
	// Seed is the workload's seed.
	Seed uint64 `json:"seed"`
	// Replicas is the number of replicas of each cluster master.
	Replicas int `json:"replicas,omitempty"`
	// ReplicaRestarts counts the replicas SIGKILLed and started again from their AOF just
	// before their master was killed (Config.ReplicaRestart).
	ReplicaRestarts int `json:"replica_restarts,omitempty"`
	// DueAtKill is, per master kill, the entries of the holds' due index on the victim.
	DueAtKill []int64 `json:"due_at_kill,omitempty"`
	// ConnectionCuts counts the cuts of every worker's Redis connections, ConnectionsCut
	// the connections they cut (Config.CutConnections), CutMidCall those cut with a
	// request sent and its reply not yet through (a script that may or may not have run).
	ConnectionCuts int `json:"connection_cuts,omitempty"`
	ConnectionsCut int `json:"connections_cut,omitempty"`
	CutMidCall     int `json:"cut_mid_call,omitempty"`
	// Baseline is the same Redis Cluster scenario with JUNBAN_REDIS_MIN_REPLICAS=0,
	// run before this one: reported, not asserted (see RunFailover).
	Baseline *Report `json:"baseline,omitempty"`

	Distinct          int            `json:"distinct_events"`
	Orders            int            `json:"orders"`
	SKUs              int            `json:"skus"`
	RedisRestarts     int            `json:"redis_restarts"`
	PGOutageS         float64        `json:"pg_outage_s"`
	UnexpectedExits   int            `json:"unexpected_exits"`
	Quiesced          bool           `json:"quiesced"`
	SeqGaps           int            `json:"seq_gaps"`
	HoldingMismatches int            `json:"holding_mismatches"`
	UnconservedLots   int            `json:"unconserved_lots"`
	Parked            int            `json:"parked"`
	OrdersDLQ         int            `json:"orders_dlq"`
	ResultsDLQ        int            `json:"results_dlq"`
	Applied           int            `json:"applied"`
	Rejected          int            `json:"rejected"`
	RejectedBy        map[string]int `json:"rejected_by_reason"`
	SendS             float64        `json:"send_s"`
	QuiesceS          float64        `json:"quiesce_s"`
	ElapsedS          float64        `json:"elapsed_s"`
	Faults            []Fault        `json:"faults"`
	Evidence          Evidence       `json:"evidence"`
	// Abandoned counts the abandoned reserve orders (Config.AbandonedShare), Expired the
	// orders with an applied order.reservation_expired; ExpiredTwice those with more than
	// one, ExpiriesLost the abandoned orders still placed past their hold (both must be 0).
	Abandoned    int `json:"abandoned"`
	Expired      int `json:"expired"`
	ExpiredTwice int `json:"expired_twice"`
	ExpiriesLost int `json:"expiries_lost"`
	// Warehouse counts the outcomes of the warehouse feed's events (loadgen.IsWarehouse),
	// which Applied and Rejected include; NewSKUs the SKUs it registered.
	Warehouse loadgen.Outcomes `json:"warehouse"`
	NewSKUs   int              `json:"skus_registered"`
	// Locations are PostgreSQL's figures per location after the run (a run whose lots are
	// at one location has none); OversoldLocations counts the locations, in either store,
	// whose lots hold or shipped more than came in there (must be 0).
	Locations         []loadgen.LocationFigures `json:"locations,omitempty"`
	OversoldLocations int                       `json:"oversold_locations"`
	// Details are the first findings of each kind, for people.
	Details Details `json:"details"`
	// Outbound is what the run's subscriber queue got from the outbound topic against the
	// outbox: nothing missing, unknown, out of sequence or invalid; the copies the relay
	// published again (a persist-worker killed mid-round) counted. Nil without SNS.
	Outbound *outboundcheck.Report `json:"outbound,omitempty"`
}

// Fault is one fault (or recovery) of the schedule, seconds after sending began.
type Fault struct {
	AtS  float64 `json:"at_s"`
	What string  `json:"what"`
}

// Details lists the first findings of each check (at most ten each).
type Details struct {
	Lost        []string `json:"lost,omitempty"`
	SeqGaps     []string `json:"seq_gaps,omitempty"`
	Holdings    []string `json:"holdings,omitempty"`
	Unconserved []string `json:"unconserved,omitempty"`
	Oversold    []string `json:"oversold,omitempty"`
	Drift       []string `json:"drift,omitempty"`
	Expiries    []string `json:"expiries,omitempty"`
}

// OK tells whether every invariant held and the run reached quiescence, and, in the
// Redis Cluster scenario, whether every master kill was failed over (a run without its
// failover proves nothing). The Baseline is not part of it.
func (r Report) OK() bool {
	return r.Lost == 0 && r.DoubleApplied == 0 && r.Drift == 0 && r.Oversold == 0 && r.OversoldLocations == 0 && r.Conserved && r.Quiesced &&
		r.failedOver() && (r.Outbound == nil || r.Outbound.OK()) && r.ExpiredTwice == 0 && r.ExpiriesLost == 0
}

func (r Report) failedOver() bool {
	return !r.RedisCluster || (r.RedisMasterKills > 0 && r.RedisFailovers == r.RedisMasterKills)
}

// Problems lists, in words, what failed.
func (r Report) Problems() []string {
	var p []string
	if !r.failedOver() {
		p = append(p, fmt.Sprintf("%d Redis master kills, %d failovers", r.RedisMasterKills, r.RedisFailovers))
	}
	if !r.Quiesced {
		p = append(p, "the fleet did not reach quiescence")
	}
	if r.Lost > 0 {
		p = append(p, fmt.Sprintf("%d events lost", r.Lost))
	}
	if r.DoubleApplied > 0 {
		p = append(p, fmt.Sprintf("%d double applications (%d seq gaps, %d lot holdings)", r.DoubleApplied, r.SeqGaps, r.HoldingMismatches))
	}
	if r.Drift > 0 {
		p = append(p, fmt.Sprintf("%d Redis-PostgreSQL drifts", r.Drift))
	}
	if r.Oversold > 0 {
		p = append(p, fmt.Sprintf("%d oversold SKUs", r.Oversold))
	}
	if r.OversoldLocations > 0 {
		p = append(p, fmt.Sprintf("%d oversold locations", r.OversoldLocations))
	}
	if !r.Conserved {
		p = append(p, fmt.Sprintf("%d lot findings break conservation", r.UnconservedLots))
	}
	if r.ExpiredTwice > 0 {
		p = append(p, fmt.Sprintf("%d orders expired twice", r.ExpiredTwice))
	}
	if r.ExpiriesLost > 0 {
		p = append(p, fmt.Sprintf("%d abandoned orders not expired", r.ExpiriesLost))
	}
	if r.Outbound != nil {
		for _, o := range r.Outbound.Problems() {
			p = append(p, "outbound: "+o)
		}
	}
	return p
}

// Print writes the report for people; with a Baseline, that run's report first and
// then both side by side.
func (r Report) Print(out io.Writer) {
	if r.Baseline != nil {
		r.Baseline.print(out, "junban chaos run 1 of 2: Redis Cluster failover, JUNBAN_REDIS_MIN_REPLICAS=0 (reported, not asserted)")
		fmt.Fprintln(out)
		r.print(out, fmt.Sprintf("junban chaos run 2 of 2: Redis Cluster failover, JUNBAN_REDIS_MIN_REPLICAS=%d (asserted)", r.MinRedisReplicas))
		fmt.Fprintln(out)
		PrintSideBySide(out, *r.Baseline, r)
		return
	}
	title := "junban chaos run"
	if r.RedisCluster {
		title = fmt.Sprintf("junban chaos run: Redis Cluster failover, JUNBAN_REDIS_MIN_REPLICAS=%d", r.MinRedisReplicas)
	}
	r.print(out, title)
}

// SeriesLine is the run's line in a series (RunSeries): seed, events, events/s, result.
func (r Report) SeriesLine(i, n int) string {
	res := "ok: every invariant held"
	if !r.OK() {
		res = "FAILED: " + strings.Join(r.Problems(), "; ")
	}
	return fmt.Sprintf("run %d of %d: seed %d, %d events, %.1f events/s, %s", i, n, r.Seed, r.Events, r.EventsPerS, res)
}

// PrintSideBySide writes what the checks found in each run, one column per run.
func PrintSideBySide(out io.Writer, runs ...Report) {
	fmt.Fprintln(out, "side by side:")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(name string, f func(Report) string) {
		fmt.Fprintf(tw, "  %s", name)
		for _, r := range runs {
			fmt.Fprintf(tw, "\t%s", f(r))
		}
		fmt.Fprintln(tw, "\t")
	}
	row("JUNBAN_REDIS_MIN_REPLICAS", func(r Report) string {
		if r.MinRedisReplicas > 0 && !r.MinRedisReplicasKnown {
			return fmt.Sprintf("%d (ignored by this order-worker)", r.MinRedisReplicas)
		}
		return strconv.Itoa(r.MinRedisReplicas)
	})
	row("events sent", func(r Report) string { return strconv.Itoa(r.Events) })
	row("events/s (first send to idle)", func(r Report) string { return fmt.Sprintf("%.1f", r.EventsPerS) })
	row("worker SIGKILLs", func(r Report) string { return strconv.Itoa(r.Kills) })
	row("master SIGKILLs / failovers", func(r Report) string { return fmt.Sprintf("%d / %d", r.RedisMasterKills, r.RedisFailovers) })
	row("replicas per master", func(r Report) string { return strconv.Itoa(max(r.Replicas, 1)) })
	row("replica lag before the kill", func(r Report) string { return fmt.Sprintf("%.1f s", r.ReplicaLagS) })
	row("failover time", func(r Report) string { return fmtSeconds(r.FailoverS) })
	row("quiescence", func(r Report) string { return strconv.FormatBool(r.Quiesced) })
	row("events lost", func(r Report) string { return strconv.Itoa(r.Lost) })
	row("events applied twice", func(r Report) string { return strconv.Itoa(r.DoubleApplied) })
	row("Redis-PostgreSQL drift", func(r Report) string { return strconv.Itoa(r.Drift) })
	row("oversold SKUs", func(r Report) string { return strconv.Itoa(r.Oversold) })
	row("lots conserved", func(r Report) string { return strconv.FormatBool(r.Conserved) })
	row("verdict", func(r Report) string {
		if r.OK() {
			return "every invariant held"
		}
		return "FAILED"
	})
	tw.Flush()
}

func fmtSeconds(s []float64) string {
	if len(s) == 0 {
		return "-"
	}
	var parts []string
	for _, v := range s {
		parts = append(parts, fmt.Sprintf("%.1f s", v))
	}
	return strings.Join(parts, ", ")
}

func (r Report) print(out io.Writer, title string) {
	fmt.Fprintln(out, title)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "seed\t%d\n", r.Seed)
	fmt.Fprintf(tw, "events sent\t%d (%d distinct, %d duplicate deliveries)\n", r.Events, r.Distinct, r.Events-r.Distinct)
	fmt.Fprintf(tw, "orders / SKUs\t%d / %d (+%d registered during the run)\n", r.Orders, r.SKUs, r.NewSKUs)
	fmt.Fprintf(tw, "applied / rejected\t%d / %d%s\n", r.Applied, r.Rejected, fmtReasons(r.RejectedBy))
	fmt.Fprintf(tw, "  of which the warehouse's\t%d / %d%s\n", r.Warehouse.Applied, r.Warehouse.Rejected, fmtReasons(r.Warehouse.RejectedBy))
	fmt.Fprintf(tw, "worker SIGKILLs\t%d\n", r.Kills)
	if r.RedisCluster {
		fmt.Fprintf(tw, "Redis Cluster\t3 masters, %d replica(s) each; order-workers with JUNBAN_REDIS_MIN_REPLICAS=%d%s\n", max(r.Replicas, 1), r.MinRedisReplicas, ignored(r))
		before := fmt.Sprintf("replica stopped %.1f s before each kill", r.ReplicaLagS)
		if r.ReplicaRestarts > 0 {
			before = fmt.Sprintf("%d replica(s) restarted from their AOF just before", r.ReplicaRestarts)
		}
		fmt.Fprintf(tw, "Redis master SIGKILLs / failovers\t%d / %d (%s; slots answering again after %s; due entries on the victim %v)\n", r.RedisMasterKills, r.RedisFailovers, before, fmtSeconds(r.FailoverS), r.DueAtKill)
	} else {
		fmt.Fprintf(tw, "Redis restarts (SIGKILL, AOF)\t%d\n", r.RedisRestarts)
		fmt.Fprintf(tw, "PostgreSQL outage\t%.0f s\n", r.PGOutageS)
	}
	if r.ConnectionCuts > 0 {
		fmt.Fprintf(tw, "Redis connections cut\t%d cuts, %d connections, %d of them in the middle of a call\n", r.ConnectionCuts, r.ConnectionsCut, r.CutMidCall)
	}
	fmt.Fprintf(tw, "unexpected worker exits\t%d (restarted)\n", r.UnexpectedExits)
	fmt.Fprintf(tw, "time\t%.1f s sending, %.1f s to quiescence, %.1f s in all (%.1f events/s)\n", r.SendS, r.QuiesceS, r.ElapsedS, r.EventsPerS)
	fmt.Fprintf(tw, "DLQ (orders / results)\t%d / %d\n", r.OrdersDLQ, r.ResultsDLQ)
	ev := r.Evidence
	fmt.Fprintf(tw, "workers' counters (at least)\t%d backlogs recovered by the sweeper, %d leases lost, %d fenced commits,\n", ev.BacklogsRecovered, ev.LeasesLost, ev.Fenced)
	fmt.Fprintf(tw, "\t%d done events found again (no second effect), %d/%d orders/results retried, %d persist batches failed\n", ev.Replayed, ev.OrdersRetried, ev.ResultsRetried, ev.PersistFailures)
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "faults:")
	for _, f := range r.Faults {
		fmt.Fprintf(out, "  t+%5.1fs  %s\n", f.AtS, f.What)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "checks:")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	if r.RedisCluster {
		fmt.Fprintf(tw, "  every master kill failed over\t%d/%d\t%s\n", r.RedisFailovers, r.RedisMasterKills, mark(r.failedOver()))
	}
	fmt.Fprintf(tw, "  quiescence\t%s\n", mark(r.Quiesced))
	fmt.Fprintf(tw, "  events lost\t%d\t%s\n", r.Lost, mark(r.Lost == 0))
	fmt.Fprintf(tw, "  events applied twice\t%d\t%s (seq gaps %d, lot holdings %d)\n", r.DoubleApplied, mark(r.DoubleApplied == 0), r.SeqGaps, r.HoldingMismatches)
	fmt.Fprintf(tw, "  Redis-PostgreSQL drift\t%d\t%s\n", r.Drift, mark(r.Drift == 0))
	fmt.Fprintf(tw, "  lots conserved\t%v\t%s (%d findings)\n", r.Conserved, mark(r.Conserved), r.UnconservedLots)
	fmt.Fprintf(tw, "  oversold SKUs\t%d\t%s\n", r.Oversold, mark(r.Oversold == 0))
	if len(r.Locations) > 0 {
		fmt.Fprintf(tw, "  oversold locations\t%d\t%s\n", r.OversoldLocations, mark(r.OversoldLocations == 0))
	}
	if r.Abandoned > 0 {
		fmt.Fprintf(tw, "  orders expired twice\t%d\t%s (%d expired, %d abandoned)\n", r.ExpiredTwice, mark(r.ExpiredTwice == 0), r.Expired, r.Abandoned)
		fmt.Fprintf(tw, "  abandoned orders not expired\t%d\t%s\n", r.ExpiriesLost, mark(r.ExpiriesLost == 0))
	}
	fmt.Fprintf(tw, "  parked events left\t%d\t\n", r.Parked)
	if o := r.Outbound; o != nil {
		fmt.Fprintf(tw, "  outbound: missing / unknown / gaps / invalid\t%d / %d / %d / %d\t%s (%d received, %d distinct, %d copies; %d rows)\n",
			o.Missing.Count, o.Unknown.Count, o.Gaps.Count, o.Invalid.Count, mark(o.OK()), o.Received, o.Distinct, o.Duplicates.Count, o.Rows)
	} else {
		fmt.Fprintf(tw, "  outbound\toff (no SNS)\t\n")
	}
	tw.Flush()
	r.printLocations(out)
	for _, d := range []struct {
		what string
		list []string
	}{{"lost", r.Details.Lost}, {"seq gaps", r.Details.SeqGaps}, {"holdings", r.Details.Holdings},
		{"conservation", r.Details.Unconserved}, {"oversold", r.Details.Oversold}, {"drift", r.Details.Drift},
		{"expiry", r.Details.Expiries}} {
		if len(d.list) == 0 {
			continue
		}
		fmt.Fprintf(out, "\nfirst %s findings:\n  %s\n", d.what, strings.Join(d.list, "\n  "))
	}
	fmt.Fprintln(out)
	if r.OK() {
		fmt.Fprintln(out, "result: every invariant held")
	} else {
		fmt.Fprintln(out, "result: FAILED: "+strings.Join(r.Problems(), "; "))
	}
}

func ignored(r Report) string {
	if r.MinRedisReplicas > 0 && !r.MinRedisReplicasKnown {
		return " (this order-worker does not read it: acknowledged without waiting)"
	}
	return ""
}

func fmtReasons(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// printLocations writes PostgreSQL's figures per location, when the run had locations.
func (r Report) printLocations(out io.Writer) {
	if len(r.Locations) == 0 {
		return
	}
	fmt.Fprintln(out, "\nper location (PostgreSQL): lots / in / sellable / held / shipped / defective / transferred out / in")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, f := range r.Locations {
		fmt.Fprintf(tw, "  %s\t%d / %d / %d / %d / %d / %d / %d / %d\n", f.Location, f.Lots, f.In, f.Sellable, f.Held, f.Shipped, f.Defective,
			f.TransferredOut, f.TransferredIn)
	}
	tw.Flush()
}
