package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/junban/junban/internal/chaos"
	"github.com/junban/junban/internal/config"
)

// runChaos runs the fleet under faults with its own Redis and PostgreSQL and checks
// the invariants (internal/chaos); it fails when one of them broke.
func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var cfg chaos.Config
	fs.IntVar(&cfg.Events, "events", chaos.EventsDefault, "least number of events sent, duplicates included (the orders follow)")
	fs.Float64Var(&cfg.DuplicateShare, "duplicates", chaos.DuplicateShareDefault, "share of events delivered twice")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed of the workload")
	fs.DurationVar(&cfg.SendDuration, "duration", chaos.SendDurationDefault, "time the workload (and the faults) are spread over")
	fs.DurationVar(&cfg.PGOutage, "pg-outage", chaos.PGOutageDefault, "how long PostgreSQL stays stopped")
	fs.IntVar(&cfg.OrderWorkerKills, "kills", chaos.OrderWorkerKillsDefault, "SIGKILLs of an order-worker replica (the persist-worker is killed once more)")
	fs.DurationVar(&cfg.QuiesceTimeout, "quiesce-timeout", chaos.QuiesceTimeoutDefault, "how long to wait for quiescence after sending")
	fs.StringVar(&cfg.BinDir, "bin", "", "directory of order-worker and persist-worker (default: go build from the repository, else next to junbanctl)")
	fs.StringVar(&cfg.WorkDir, "workdir", "", "where the temporary directory is made (default: the system's)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary directory (worker logs, Redis and PostgreSQL data)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: junbanctl chaos [--events N] [--pg-outage D] [--duration D] [--bin DIR] [--keep] [--json]")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if cfg.Events < 1 || cfg.SendDuration <= 0 || cfg.PGOutage < 0 || cfg.OrderWorkerKills < 1 {
		return fmt.Errorf("%w: --events, --duration and --kills must be positive, --pg-outage not negative", errUsage)
	}
	sqsCfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	cfg.SQS = sqsCfg
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v := os.Getenv(k); v != "" {
			cfg.ChildEnv = append(cfg.ChildEnv, k+"="+v)
		}
	}
	cfg.Progress = os.Stderr
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *jsonOut {
		if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.Print(os.Stdout)
	}
	if !rep.OK() {
		return fmt.Errorf("chaos: %s", strings.Join(rep.Problems(), "; "))
	}
	return nil
}
