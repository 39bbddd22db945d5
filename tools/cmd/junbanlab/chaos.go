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

func chaosCmd() *cobra.Command {
	var cfg chaos.Config
	var jsonOut bool
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
		RunE: func(c *cobra.Command, _ []string) error { return runChaos(c.Context(), c.OutOrStdout(), cfg, jsonOut) },
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
	fs.IntVar(&cfg.MinRedisReplicas, "min-replicas", chaos.MinRedisReplicasDefault, "with --redis-cluster: the order-workers' JUNBAN_REDIS_MIN_REPLICAS in the asserted run (0: one run only)")
	fs.IntVar(&cfg.MasterKills, "master-kills", chaos.MasterKillsDefault, "with --redis-cluster: SIGKILLs of a master, one after the other")
	fs.DurationVar(&cfg.ReplicaLag, "replica-lag", chaos.ReplicaLagDefault, "with --redis-cluster: how long the victim's replica is stopped (SIGSTOP) before its master is killed, so that it lacks what the master acknowledged last (0: none)")
	fs.DurationVar(&cfg.NodeTimeout, "node-timeout", chaos.NodeTimeoutDefault, "with --redis-cluster: the cluster's cluster-node-timeout (time to failover)")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON (--redis-cluster: the asserted run, the other as \"baseline\")")
	return c
}

// runChaos runs the fleet under faults with its own Redis and PostgreSQL and checks
// the invariants (tools/chaos); it fails when one of them broke.
func runChaos(ctx context.Context, w io.Writer, cfg chaos.Config, jsonOut bool) error {
	if cfg.Events < 1 || cfg.SendDuration <= 0 || cfg.PGOutage < 0 || cfg.OrderWorkerKills < 1 {
		return cli.Usagef("--events, --duration and --kills must be positive, --pg-outage not negative")
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
	if cfg.MasterKills < 1 || cfg.NodeTimeout <= 0 || cfg.ReplicaLag < -1 || cfg.MinRedisReplicas < 0 || cfg.MinRedisReplicas > 1 {
		return cli.Usagef("--master-kills and --node-timeout must be positive, --replica-lag not negative, --min-replicas 0 or 1 (one replica per master)")
	}
	run := chaos.Run
	if cfg.RedisCluster {
		if cfg.MinRedisReplicas > 0 {
			run = chaos.RunFailover
		}
	} else {
		cfg.MinRedisReplicas = 0 // a single Redis has no replica to wait for
	}
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
	cfg.Progress = os.Stderr
	rep, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
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
