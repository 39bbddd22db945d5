package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/dlq"
	"github.com/junban/junban/internal/queue"
)

// errRedriveIntoDLQ: a redrive target is the dead-letter queue itself (internal/dlq).
var errRedriveIntoDLQ = dlq.ErrRedriveIntoDLQ

// release makes received messages visible again.
func release(ctx context.Context, c *sqs.Client, url string, handles []string) {
	dlq.Release(ctx, c, url, handles)
}

func runDLQList(ctx context.Context, args []string) error {
	return dlqList(ctx, os.Stdout, args)
}

// dlqList prints the messages of a dead-letter queue with their reasons to w. It leaves
// them where they are (they are hidden for a few seconds while it reads).
func dlqList(ctx context.Context, w io.Writer, args []string) error {
	fs := flag.NewFlagSet("dlq list", flag.ContinueOnError)
	name := fs.String("queue", "", "dead-letter queue, name or URL (default JUNBAN_ORDERS_DLQ)")
	maxN := fs.Int("max", 100, "list at most this many messages")
	width := fs.Int("width", 120, "truncate bodies to this many characters (0: whole)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *maxN < 1 {
		return fmt.Errorf("%w: dlq list: --max %d is below 1", errUsage, *maxN)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	*name = cmp.Or(*name, cfg.OrdersDLQ)
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	url, err := queue.ResolveURL(ctx, c, *name)
	if err != nil {
		return err
	}
	msgs, _, err := dlq.List(ctx, c, url, *maxN)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE ID\tRECEIVES\tREASON\tBODY")
	for _, m := range msgs {
		body := m.Body
		if *width > 0 && len(body) > *width {
			body = body[:*width] + "..."
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.ID, m.Receives, m.Reason, body)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d message(s) in %s\n", len(msgs), *name)
	return nil
}

// redriveReport is what one redrive run did, printable.
type redriveReport struct{ dlq.Report }

func (r redriveReport) print(w io.Writer) {
	var to []string
	for _, q := range slices.Sorted(maps.Keys(r.Moved)) {
		to = append(to, fmt.Sprintf("%d to %s", r.Moved[q], q))
	}
	fmt.Fprintf(w, "redrive: moved %d message(s) from %s", r.Total(), r.DLQ)
	if len(to) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(to, ", "))
	}
	fmt.Fprintln(w)
	if r.Repeats > 0 {
		fmt.Fprintf(w, "redrive: left %d message(s) whose body was already moved in this run: they failed again and came back, or are duplicates (dlq list shows the reasons)\n", r.Repeats)
	}
	if r.BadSource > 0 {
		fmt.Fprintf(w, "redrive: left %d message(s) whose %s cannot be used\n", r.BadSource, queue.AttrSourceQueue)
	}
	fmt.Fprintf(w, "redrive: %s held about %d message(s) at the start (the most one run moves, at least 10)", r.DLQ, r.Depth)
	if r.Left >= 0 {
		fmt.Fprintf(w, ", about %d now", r.Left)
	}
	fmt.Fprintln(w)
}

func runDLQRedrive(ctx context.Context, args []string) error {
	rep, err := dlqRedrive(ctx, args)
	if rep.DLQ != "" {
		rep.print(os.Stdout)
	}
	return err
}

// dlqRedrive parses the flags of dlq redrive and runs dlq.Redrive (which says what a run
// moves and why it cannot loop). A target it cannot use is a usage error.
func dlqRedrive(ctx context.Context, args []string) (redriveReport, error) {
	fs := flag.NewFlagSet("dlq redrive", flag.ContinueOnError)
	name := fs.String("queue", "", "dead-letter queue, name or URL (default JUNBAN_ORDERS_DLQ)")
	to := fs.String("to", "", "queue for the messages without a junban-source-queue attribute (default: the queue the DLQ serves: JUNBAN_ORDERS_QUEUE, JUNBAN_RESULTS_QUEUE, or X for X-dlq)")
	maxN := fs.Int("max", 0, "move at most this many messages (0: no limit beyond the DLQ's depth at the start)")
	if err := parseFlags(fs, args, false); err != nil {
		return redriveReport{}, err
	}
	if *maxN < 0 {
		return redriveReport{}, fmt.Errorf("%w: dlq redrive: --max %d is negative", errUsage, *maxN)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return redriveReport{}, err
	}
	opt := dlq.RedriveOptions{DLQ: cmp.Or(*name, cfg.OrdersDLQ), To: *to, Max: *maxN}
	if opt.To == "" && dlq.ServedQueue(cfg, opt.DLQ) == "" {
		// Checked before connecting, so that the mistake is reported without SQS.
		_, err := dlq.Redrive(ctx, nil, cfg, opt)
		return redriveReport{}, fmt.Errorf("%w: dlq redrive: %w", errUsage, err)
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return redriveReport{}, err
	}
	rep, err := dlq.Redrive(ctx, c, cfg, opt)
	if errors.Is(err, dlq.ErrBadTarget) {
		err = fmt.Errorf("%w: dlq redrive: %w", errUsage, err)
	}
	return redriveReport{rep}, err
}
