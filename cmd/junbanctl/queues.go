package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// queuesOptions are the flags of queues create.
type queuesOptions struct {
	maxReceive, visibility, retention int
	replace, quiet, asJSON, fifo      bool
}

// queuesReport is what queues create prints with --json: every queue, in place or not.
type queuesReport struct {
	Queues []queueState `json:"queues"`
}

// queueState is one queue queues create looked at.
type queueState struct {
	// Name and URL of the queue.
	Name string `json:"name"`
	URL  string `json:"url"`
	// DLQ is the dead-letter queue a work queue redrives to ("" for a DLQ).
	DLQ string `json:"dlq,omitempty"`
	// State is created, updated (its redrive policy set now) or exists.
	State string `json:"state"`
}

func queuesCreateCmd() *cobra.Command {
	var o queuesOptions
	c := &cobra.Command{
		Use:   "create",
		Short: "create the queues, their DLQs and redrive policies where missing (idempotent)",
		Long: "create makes junban's queues where they are missing: orders and results, each with its\n" +
			"dead-letter queue and the redrive policy to it, named by JUNBAN_ORDERS_QUEUE, JUNBAN_ORDERS_DLQ,\n" +
			"JUNBAN_RESULTS_QUEUE and JUNBAN_RESULTS_DLQ. What exists is left as it is and reported.\n" +
			"A name that ends in .fifo is a FIFO queue; a queue and its DLQ are both FIFO or neither.\n" +
			"--fifo makes all four FIFO queues, adding .fifo to each name that lacks it (by default\n" +
			"orders.fifo, orders-dlq.fifo, results.fifo and results-dlq.fifo): the binaries need the\n" +
			"same names in those variables.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runQueuesCreate(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.IntVar(&o.maxReceive, "max-receive-count", queue.MaxReceiveCountDefault, "receives before SQS moves a message to the DLQ (redrive policy), 1..1000")
	fs.IntVar(&o.visibility, "visibility", queue.VisibilityTimeoutDefault, "visibility timeout in seconds of a work queue it creates, 1..43200")
	fs.IntVar(&o.retention, "dlq-retention", queue.DLQRetentionDefault, "message retention in seconds of a DLQ it creates, 60..1209600")
	fs.BoolVar(&o.fifo, "fifo", false, "FIFO queues: .fifo added to each configured name that lacks it")
	fs.BoolVar(&o.replace, "replace-redrive", false, "set the redrive policy of an existing queue whose policy differs (without it: an error)")
	fs.BoolVar(&o.quiet, "quiet", false, "print nothing when every queue is in place")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON (every queue, --quiet or not)")
	return c
}

// runQueuesCreate creates junban's queues where they are missing. It is idempotent.
func runQueuesCreate(ctx context.Context, w io.Writer, o queuesOptions) error {
	switch {
	case o.maxReceive < 1 || o.maxReceive > 1000:
		return cli.Usagef("-max-receive-count %d: want 1..1000", o.maxReceive)
	case o.visibility < 1 || o.visibility > 43200:
		return cli.Usagef("-visibility %d: want 1..43200 seconds", o.visibility)
	case o.retention < 60 || o.retention > 1209600:
		return cli.Usagef("-dlq-retention %d: want 60..1209600 seconds", o.retention)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	specs, err := queueSpecs(cfg, o)
	if err != nil {
		return err
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	var rep queuesReport
	for _, s := range specs {
		p, err := queue.ProvisionPair(ctx, c, s)
		if err != nil {
			return err
		}
		rep.Queues = append(rep.Queues,
			queueState{Name: s.DLQName, URL: p.DLQURL, State: state(p.DLQCreated, false)},
			queueState{Name: s.Name, URL: p.URL, DLQ: s.DLQName, State: state(p.Created, p.RedriveSet)})
		if o.asJSON || o.quiet && !p.DLQCreated && !p.Created && !p.RedriveSet {
			continue
		}
		fmt.Fprintf(w, "%-8s %s\n", state(p.DLQCreated, false), p.DLQURL)
		fmt.Fprintf(w, "%-8s %s (redrive to %s after %d receives%s)\n", state(p.Created, p.RedriveSet), p.URL, s.DLQName, o.maxReceive,
			map[bool]string{true: ", policy set now"}[p.RedriveSet])
	}
	if o.asJSON {
		return cli.WriteJSON(w, rep)
	}
	if renamed := fifoSettings(cfg, specs); renamed != "" && !o.quiet {
		fmt.Fprintf(w, "FIFO queues: point junban at them with %s\n", renamed)
	}
	return nil
}

// fifoSettings names the settings whose queue --fifo renamed, with the names it made
// ("" when it renamed none).
func fifoSettings(cfg config.SQS, specs []queue.PairSpec) string {
	var out []string
	for i, set := range [][2]string{{"JUNBAN_ORDERS_QUEUE", "JUNBAN_ORDERS_DLQ"}, {"JUNBAN_RESULTS_QUEUE", "JUNBAN_RESULTS_DLQ"}} {
		configured := [][2]string{{cfg.OrdersQueue, cfg.OrdersDLQ}, {cfg.ResultsQueue, cfg.ResultsDLQ}}[i]
		for k, name := range []string{specs[i].Name, specs[i].DLQName} {
			if was, _ := queueName(configured[k]); was != name {
				out = append(out, set[k]+"="+name)
			}
		}
	}
	return strings.Join(out, " ")
}

// queueSpecs are the queue pairs of cfg with the options of o.
func queueSpecs(cfg config.SQS, o queuesOptions) ([]queue.PairSpec, error) {
	pairs := cfg.Pairs()
	specs := make([]queue.PairSpec, 0, len(pairs))
	for _, p := range pairs {
		name, err := queueName(p.Queue)
		if err != nil {
			return nil, err
		}
		dlq, err := queueName(p.DLQ)
		if err != nil {
			return nil, err
		}
		if o.fifo {
			name, dlq = fifoName(name), fifoName(dlq)
		}
		// Every pair is checked before any queue is created.
		if err := queue.CheckPair(name, dlq); err != nil {
			return nil, err
		}
		specs = append(specs, queue.PairSpec{
			Name: name, DLQName: dlq, MaxReceiveCount: o.maxReceive,
			VisibilityTimeout: o.visibility, DLQRetention: o.retention, ReplaceRedrive: o.replace,
		})
	}
	return specs, nil
}

// fifoName is name as a FIFO queue's: with ".fifo" at its end.
func fifoName(name string) string {
	if strings.HasSuffix(name, queue.FIFOSuffix) {
		return name
	}
	return name + queue.FIFOSuffix
}

func state(created, changed bool) string {
	switch {
	case created:
		return "created"
	case changed:
		return "updated"
	}
	return "exists"
}

// queueName is the queue name of a setting that holds a name or a queue URL (its last
// path segment).
func queueName(nameOrURL string) (string, error) {
	if !strings.HasPrefix(nameOrURL, "http://") && !strings.HasPrefix(nameOrURL, "https://") {
		return nameOrURL, nil
	}
	u, err := url.Parse(nameOrURL)
	if err != nil {
		return "", fmt.Errorf("queues create: queue URL %q: %w", nameOrURL, err)
	}
	name := u.Path[strings.LastIndex(u.Path, "/")+1:]
	if name == "" {
		return "", fmt.Errorf("queues create: queue URL %q has no queue name", nameOrURL)
	}
	return name, nil
}
