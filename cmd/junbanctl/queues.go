package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/queue"
)

// runQueuesCreate creates junban's queues where they are missing: orders and results,
// each with its dead-letter queue and the redrive policy to it, named by
// JUNBAN_ORDERS_QUEUE, JUNBAN_ORDERS_DLQ, JUNBAN_RESULTS_QUEUE and JUNBAN_RESULTS_DLQ.
// It is idempotent: what exists is left as it is and reported.
func runQueuesCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("queues create", flag.ContinueOnError)
	maxReceive := fs.Int("max-receive-count", queue.MaxReceiveCountDefault, "receives before SQS moves a message to the DLQ (redrive policy), 1..1000")
	visibility := fs.Int("visibility", queue.VisibilityTimeoutDefault, "visibility timeout in seconds of a work queue it creates, 1..43200")
	retention := fs.Int("dlq-retention", queue.DLQRetentionDefault, "message retention in seconds of a DLQ it creates, 60..1209600")
	replace := fs.Bool("replace-redrive", false, "set the redrive policy of an existing queue whose policy differs (without it: an error)")
	quiet := fs.Bool("quiet", false, "print nothing when every queue is in place")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	switch {
	case *maxReceive < 1 || *maxReceive > 1000:
		return fmt.Errorf("%w: -max-receive-count %d: want 1..1000", errUsage, *maxReceive)
	case *visibility < 1 || *visibility > 43200:
		return fmt.Errorf("%w: -visibility %d: want 1..43200 seconds", errUsage, *visibility)
	case *retention < 60 || *retention > 1209600:
		return fmt.Errorf("%w: -dlq-retention %d: want 60..1209600 seconds", errUsage, *retention)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	pairs := [][2]string{{cfg.OrdersQueue, cfg.OrdersDLQ}, {cfg.ResultsQueue, cfg.ResultsDLQ}}
	specs := make([]queue.PairSpec, 0, len(pairs))
	for _, p := range pairs {
		name, err := queueName(p[0])
		if err != nil {
			return err
		}
		dlq, err := queueName(p[1])
		if err != nil {
			return err
		}
		specs = append(specs, queue.PairSpec{
			Name: name, DLQName: dlq, MaxReceiveCount: *maxReceive,
			VisibilityTimeout: *visibility, DLQRetention: *retention, ReplaceRedrive: *replace,
		})
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	for _, s := range specs {
		p, err := queue.ProvisionPair(ctx, c, s)
		if err != nil {
			return err
		}
		if *quiet && !p.DLQCreated && !p.Created && !p.RedriveSet {
			continue
		}
		fmt.Printf("%-8s %s\n", state(p.DLQCreated, false), p.DLQURL)
		fmt.Printf("%-8s %s (redrive to %s after %d receives%s)\n", state(p.Created, p.RedriveSet), p.URL, s.DLQName, *maxReceive,
			map[bool]string{true: ", policy set now"}[p.RedriveSet])
	}
	return nil
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
