package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/tools/chaos"
)

// chaosOptions are the command's flags besides chaos.Config's.
type chaosOptions struct {
	json bool
	// runs is the number of runs in a row (RunSeries); 1 with --redis-cluster runs the
	// MIN_REPLICAS=0 baseline before the asserted run, unless noBaseline.
	runs       int
	noBaseline bool
}

func chaosCmd() *cobra.Command {
	var cfg chaos.Config
	var o chaosOptions
	c := &cobra.Command{
		Use:   "chaos",
		Short: "run a fault-injection load and check the invariants",
		Long: "chaos runs the fleet under faults with its own Redis and PostgreSQL and checks the\n" +
			"invariants (docs/performance.md, \"chaos\"); it fails (exit 1) when one of them broke.\n" +
			"With SNS beside SQS (AWS_ENDPOINT_URL_SNS, fauxqs) each run creates an outbound topic with\n" +
			"a queue subscribed, the persist-worker publishes to it, and the check ends with what the\n" +
			"queue got against the outbox: none missing, none unknown, no gap, every body valid\n" +
			"(copies counted: killed persist-workers make the relay publish some again).",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runChaos(c.Context(), c.OutOrStdout(), cfg, o) },
	}
	fs := c.Flags()
	fs.IntVar(&cfg.Events, "events", chaos.EventsDefault, "least number of events sent, duplicates included (the orders follow)")
	fs.Float64Var(&cfg.DuplicateShare, "duplicates", chaos.DuplicateShareDefault, "share of events delivered twice")
	fs.Float64Var(&cfg.WarehouseShare, "warehouse", chaos.WarehouseShareDefault, "share of the events that are the warehouse's (loadgen's feed; 0: none)")
	fs.Float64Var(&cfg.AbandonedShare, "abandoned", 0.05, "share of the orders that are abandoned checkouts: reserve orders with a short hold (--hold-for), never paid nor cancelled, which must each expire once (0: none)")
	fs.DurationVar(&cfg.HoldFor, "hold-for", chaos.HoldForDefault, "the hold of an abandoned order")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed of the workload")
	fs.DurationVar(&cfg.SendDuration, "duration", chaos.SendDurationDefault, "time the workload (and the faults) are spread over")
	fs.DurationVar(&cfg.PGOutage, "pg-outage", chaos.PGOutageDefault, "how long PostgreSQL stays stopped")
	fs.IntVar(&cfg.OrderWorkerKills, "kills", chaos.OrderWorkerKillsDefault, "SIGKILLs of an order-worker replica (the persist-worker is killed once more)")
	fs.DurationVar(&cfg.QuiesceTimeout, "quiesce-timeout", chaos.QuiesceTimeoutDefault, "how long to wait for quiescence after sending")
	fs.StringVar(&cfg.BinDir, "bin", "", "directory of order-worker and persist-worker (default: go build from the repository, else next to junbanlab)")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "where the temporary directory is made (default: the system's)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary directory (worker logs, Redis and PostgreSQL data)")
	fs.BoolVar(&cfg.RedisCluster, "redis-cluster", false, "the failover scenario: the fleet on a local Redis Cluster (3 masters, a replica each), a master SIGKILLed mid-run; run with JUNBAN_REDIS_MIN_REPLICAS=0 (reported) and then --min-replicas (asserted); no PostgreSQL outage")
	fs.IntVar(&cfg.MinRedisReplicas, "min-replicas", chaos.MinRedisReplicasDefault, "with --redis-cluster: the order-workers' JUNBAN_REDIS_MIN_REPLICAS in the asserted run (0: one run only; at most --replicas)")
	fs.IntVar(&cfg.Replicas, "replicas", chaos.ReplicasDefault, "with --redis-cluster: replicas of each master (1 or 2)")
	fs.BoolVar(&cfg.ReplicaRestart, "replica-restart", false, "with --redis-cluster: instead of the replica lag, SIGKILL the victim's replica, SIGSTOP its master, start the replica again from its AOF, then SIGKILL the master")
	fs.BoolVar(&cfg.CutConnections, "cut-connections", false, "put a TCP proxy in front of each Redis node for the workers and cut every connection through them every --cut-every while sending")
	fs.DurationVar(&cfg.CutEvery, "cut-every", chaos.CutEveryDefault, "with --cut-connections: the pause between two cuts")
	fs.BoolVar(&cfg.Locations, "locations", false, "spread the lots over three locations (two warehouses that ship, a store that only hands over) and route every order: pickups at the store, the others closest then ranked")
	fs.IntVar(&o.runs, "runs", 1, "runs in a row, seeds --seed, --seed+1, ...; a line each (seed, events, events/s, result); with --redis-cluster and more than one run, no MIN_REPLICAS=0 baseline")
	fs.IntVar(&cfg.MasterKills, "master-kills", chaos.MasterKillsDefault, "with --redis-cluster: SIGKILLs of a master, one after the other")
	fs.DurationVar(&cfg.ReplicaLag, "replica-lag", chaos.ReplicaLagDefault, "with --redis-cluster: how long the victim's replica is stopped (SIGSTOP) before its master is killed, so that it lacks what the master acknowledged last (0: none)")
	fs.DurationVar(&cfg.NodeTimeout, "node-timeout", chaos.NodeTimeoutDefault, "with --redis-cluster: the cluster's cluster-node-timeout (time to failover)")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "with --redis-cluster: no JUNBAN_REDIS_MIN_REPLICAS=0 run before the asserted one")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON (--redis-cluster: the asserted run, the other as \"baseline\"; --runs above 1: a list)")
	return c
}

// runChaos runs the fleet under faults with its own Redis and PostgreSQL and checks
// the invariants (tools/chaos); it fails when one of them broke.
func runChaos(ctx context.Context, w io.Writer, cfg chaos.Config, o chaosOptions) error {
	if err := chaosUsage(&cfg, o); err != nil {
		return err
	}
	if err := chaosServices(&cfg); err != nil {
		return err
	}
	cfg.Progress = os.Stderr
	if o.runs > 1 {
		return runChaosSeries(ctx, w, cfg, o)
	}
	run := chaos.Run
	if cfg.RedisCluster && cfg.MinRedisReplicas > 0 && !o.noBaseline {
		run = chaos.RunFailover
	}
	rep, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	if o.json {
		if err := json.NewEncoder(w).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.Print(w)
	}
	if !rep.OK() {
		return fmt.Errorf("chaos: %s", strings.Join(rep.Problems(), "; "))
	}
	return nil
}

// chaosUsage checks the flags and turns their zeros into Config's "none".
func chaosUsage(cfg *chaos.Config, o chaosOptions) error {
	if cfg.Events < 1 || cfg.SendDuration <= 0 || cfg.PGOutage < 0 || cfg.OrderWorkerKills < 1 || o.runs < 1 {
		return cli.Usagef("--events, --duration, --kills and --runs must be positive, --pg-outage not negative")
	}
	if cfg.AbandonedShare < 0 || cfg.AbandonedShare > 0.5 || cfg.HoldFor < time.Second {
		return cli.Usagef("--abandoned must be within [0, 0.5] and --hold-for at least 1s")
	}
	if cfg.ReplicaLag == 0 {
		cfg.ReplicaLag = -1 // none; zero in Config takes the default
	}
	if cfg.WarehouseShare == 0 {
		cfg.WarehouseShare = -1 // none; zero in Config takes the default
	}
	if cfg.MasterKills < 1 || cfg.NodeTimeout <= 0 || cfg.ReplicaLag < -1 || cfg.CutEvery <= 0 {
		return cli.Usagef("--master-kills, --node-timeout and --cut-every must be positive, --replica-lag not negative")
	}
	if cfg.Replicas < 1 || cfg.Replicas > 2 || cfg.MinRedisReplicas < 0 || cfg.MinRedisReplicas > cfg.Replicas {
		return cli.Usagef("--replicas must be 1 or 2, --min-replicas within 0..--replicas")
	}
	if !cfg.RedisCluster {
		if cfg.ReplicaRestart {
			return cli.Usagef("--replica-restart needs --redis-cluster")
		}
		cfg.MinRedisReplicas = 0 // a single Redis has no replica to wait for
	}
	return nil
}

// chaosServices reads the SQS and SNS endpoints and the credentials the workers get.
func chaosServices(cfg *chaos.Config) error {
	sqsCfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	cfg.SQS = sqsCfg
	// The outbound topic and its subscriber queue go beside the queues when there is SNS.
	tcfg, err := config.Load[topics.Config]()
	if err != nil {
		return err
	}
	cfg.SNSEndpoint = tcfg.Endpoint
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v := os.Getenv(k); v != "" {
			cfg.ChildEnv = append(cfg.ChildEnv, k+"="+v)
		}
	}
	return nil
}

// runChaosSeries runs the scenario o.runs times, prints each report and then a line per
// run; it fails when a run did.
func runChaosSeries(ctx context.Context, w io.Writer, cfg chaos.Config, o chaosOptions) error {
	reps, err := chaos.RunSeries(ctx, cfg, o.runs)
	if o.json {
		if jerr := json.NewEncoder(w).Encode(reps); jerr != nil {
			return jerr
		}
	} else {
		for i, r := range reps {
			r.Print(w)
			fmt.Fprintf(w, "\n(run %d of %d)\n\n", i+1, o.runs)
		}
		fmt.Fprintln(w, "runs:")
		for i, r := range reps {
			fmt.Fprintln(w, "  "+r.SeriesLine(i+1, o.runs))
		}
	}
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range reps {
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("chaos: %d of %d runs failed", failed, o.runs)
	}
	return nil
}
