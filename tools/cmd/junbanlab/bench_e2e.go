package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/tools/e2ebench"
)

func benchE2ECmd() *cobra.Command {
	var o e2ebench.Options
	c := &cobra.Command{
		Use:   "e2e",
		Short: "benchmark events/s from send to commit against the SQS ceiling",
		Long: "e2e measures events per second from send to commit in PostgreSQL through both queues, with\n" +
			"order-workers and a persist-worker, and in the same run the raw send+receive+delete rate of\n" +
			"the SQS endpoint; then the send -> commit latency at a fixed rate below that capacity, events\n" +
			"parked on purpose apart. --outbound runs it twice in one sitting, the persist-worker's outbound\n" +
			"events off and then on (a topic and a subscribed queue of its own, drained while the load runs,\n" +
			"then checked against the outbox), and prints both side by side (--json: outbound_off and\n" +
			"outbound_on); it fails when the check finds a message missing, unknown, out of sequence or invalid.\n" +
			"--tracing runs it twice in one sitting, tracing off (no inherited OTEL_* variable reaches the\n" +
			"fleet) and then on (every span, sampler always_on, to an OTLP/HTTP receiver in junbanlab), and\n" +
			"prints both side by side with each process's CPU seconds per 1000 events and the spans per event\n" +
			"(--json: tracing_off and tracing_on).",
		Args: cli.NoArgs,
		RunE: benchRunE(&o, func(o e2ebench.Options) error {
			if o.Rate < 0 || o.LatencyDuration < 0 || o.Duration <= 0 {
				return cli.Usagef("-duration must be positive, -rate and -latency-duration not negative")
			}
			if o.Tracing && o.Outbound {
				return cli.Usagef("--tracing and --outbound each run two measurements: give one of them")
			}
			return nil
		}, e2ebench.Run),
	}
	fs := c.Flags()
	fs.DurationVar(&o.Duration, "duration", 60*time.Second, "approximate length of the load phase")
	fs.Float64Var(&o.Rate, "rate", 0, "events/s of the latency phase (0: half of the capacity the load phase measured)")
	fs.DurationVar(&o.LatencyDuration, "latency-duration", 0, "approximate length of the latency phase (0: half of -duration, at least 10s)")
	fs.IntVar(&o.Workers, "workers", 2, "order-worker replicas")
	fleetFlags(fs, &o.BinDir, &o.JSON)
	fs.BoolVar(&o.Outbound, "outbound", false, "measure twice, outbound events off then on (needs SNS: fauxqs or AWS)")
	fs.BoolVar(&o.Tracing, "tracing", false, "measure twice, tracing off then on (spans to an OTLP receiver in junbanlab)")
	fs.StringVar(&o.Profile, "profile", "", "directory for a CPU profile of order-worker-0, every worker's /metrics and Redis commandstats before and after the load")
	return c
}
