package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// release makes received messages visible again.
func release(ctx context.Context, c *sqs.Client, url string, handles []string) {
	dlq.Release(ctx, c, url, handles)
}

// dlqListOptions are the flags of dlq list.
type dlqListOptions struct {
	queue      string
	max, width int
	asJSON     bool
}

// dlqListReport is what dlq list prints with --json.
type dlqListReport struct {
	// DLQ is the dead-letter queue listed, as given (or JUNBAN_ORDERS_DLQ).
	DLQ      string        `json:"dlq"`
	Messages []dlq.Message `json:"messages"`
}

func dlqListCmd() *cobra.Command {
	var o dlqListOptions
	c := &cobra.Command{
		Use:   "list",
		Short: "list a dead-letter queue's messages with their reasons",
		Long: "list prints the messages of a dead-letter queue with their reasons. It leaves them where\n" +
			"they are (they are hidden for a few seconds while it reads).",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return dlqList(c.Context(), c.OutOrStdout(), o) },
	}
	fs := c.Flags()
	fs.StringVar(&o.queue, "queue", "", "dead-letter queue, name or URL (default JUNBAN_ORDERS_DLQ)")
	fs.IntVar(&o.max, "max", 100, "list at most this many messages")
	fs.IntVar(&o.width, "width", 120, "truncate bodies to this many characters (0: whole; --json: always whole)")
	fs.BoolVar(&o.asJSON, "json", false, "print the messages as JSON")
	return c
}

// dlqList prints the messages of a dead-letter queue with their reasons to w.
func dlqList(ctx context.Context, w io.Writer, o dlqListOptions) error {
	if o.max < 1 {
		return cli.Usagef("dlq list: --max %d is below 1", o.max)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	name := cmp.Or(o.queue, cfg.OrdersDLQ)
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	url, err := queue.ResolveURL(ctx, c, name)
	if err != nil {
		return err
	}
	msgs, _, err := dlq.List(ctx, c, url, o.max)
	if err != nil {
		return err
	}
	if o.asJSON {
		return cli.WriteJSON(w, dlqListReport{DLQ: name, Messages: append([]dlq.Message{}, msgs...)})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE ID\tRECEIVES\tREASON\tBODY")
	for _, m := range msgs {
		body := m.Body
		if o.width > 0 && len(body) > o.width {
			body = body[:o.width] + "..."
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.ID, m.Receives, m.Reason, body)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d message(s) in %s\n", len(msgs), name)
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
	fmt.Fprintf(w, "redrive: %s held about %d message(s) at the start (the most one run moves, at least 10)", r.DLQ, r.Depth)
	if r.Left >= 0 {
		fmt.Fprintf(w, ", about %d now", r.Left)
	}
	fmt.Fprintln(w)
}

// dlqRedriveOptions are the flags of dlq redrive.
type dlqRedriveOptions struct {
	queue, to string
	max       int
	asJSON    bool
}

func dlqRedriveCmd() *cobra.Command {
	var o dlqRedriveOptions
	c := &cobra.Command{
		Use:   "redrive",
		Short: "move a dead-letter queue's messages back to the queue it serves",
		Long: "redrive moves the messages of JUNBAN_ORDERS_DLQ to JUNBAN_ORDERS_QUEUE, or of JUNBAN_RESULTS_DLQ to\n" +
			"JUNBAN_RESULTS_QUEUE, whatever a message's junban-source-queue attribute says. Any other queue is\n" +
			"refused.",
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			rep, err := dlqRedrive(c.Context(), o)
			if rep.DLQ == "" {
				return err
			}
			if o.asJSON {
				return errors.Join(err, cli.WriteJSON(c.OutOrStdout(), rep.Report))
			}
			rep.print(c.OutOrStdout())
			return err
		},
	}
	fs := c.Flags()
	fs.StringVar(&o.queue, "queue", "", "dead-letter queue: JUNBAN_ORDERS_DLQ or JUNBAN_RESULTS_DLQ, name or URL (default JUNBAN_ORDERS_DLQ)")
	fs.StringVar(&o.to, "to", "", "must name the queue the DLQ serves (JUNBAN_ORDERS_QUEUE or JUNBAN_RESULTS_QUEUE), which is where the messages go anyway; any other queue is refused")
	fs.IntVar(&o.max, "max", 0, "move at most this many messages (0: no limit beyond the DLQ's depth at the start)")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// dlqRedrive runs dlq.Redrive (which says where a run moves the messages, what it
// refuses and why it cannot loop). A queue it refuses is a usage error.
func dlqRedrive(ctx context.Context, o dlqRedriveOptions) (redriveReport, error) {
	if o.max < 0 {
		return redriveReport{}, cli.Usagef("dlq redrive: --max %d is negative", o.max)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return redriveReport{}, err
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return redriveReport{}, err
	}
	rep, err := dlq.Redrive(ctx, c, cfg, dlq.RedriveOptions{DLQ: cmp.Or(o.queue, cfg.OrdersDLQ), To: o.to, Max: o.max})
	if errors.Is(err, dlq.ErrBadTarget) {
		err = fmt.Errorf("%w: dlq redrive: %w", cli.ErrUsage, err)
	}
	return redriveReport{rep}, err
}
