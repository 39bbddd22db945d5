package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/cli"
	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/topics"
)

// topicsOptions are the flags of topics subscribe.
type topicsOptions struct {
	raw, asJSON bool
	filter      []string
}

func topicsSubscribeCmd() *cobra.Command {
	var o topicsOptions
	c := &cobra.Command{
		Use:   "subscribe TOPIC_ARN [--raw] [--filter TYPE,...] [--json]",
		Short: "subscribe the orders queue to an SNS topic and let the topic send to it (idempotent)",
		Long: "subscribe subscribes the orders queue (JUNBAN_ORDERS_QUEUE) to the SNS topic TOPIC_ARN, with raw\n" +
			"message delivery when --raw is given (without it the queue gets SNS notifications, which the\n" +
			"order-worker unwraps), and adds to the queue's policy the statement that lets the topic send to\n" +
			"it (sns.amazonaws.com, aws:SourceArn the topic; the policy's other statements are kept).\n\n" +
			"--filter TYPE,... sets a filter policy on the message attribute \"" + topics.TypeAttribute + "\": only those event\n" +
			"types are delivered, so publishers must set that attribute to the event's type (a message\n" +
			"without it is dropped by the filter). Run again, it finds the subscription and sets what\n" +
			"differs: one subscription and one policy statement per topic.",
		Args: cli.OneArg("TOPIC_ARN"),
		RunE: func(c *cobra.Command, args []string) error {
			return runTopicsSubscribe(c.Context(), c.OutOrStdout(), args[0], o)
		},
	}
	fs := c.Flags()
	fs.BoolVar(&o.raw, "raw", false, "raw message delivery: the queue gets the event alone, not the SNS notification")
	fs.StringSliceVar(&o.filter, "filter", nil, "deliver only these event types (filter policy on the message attribute \"type\")")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// runTopicsSubscribe subscribes the orders queue to topicARN. It is idempotent.
func runTopicsSubscribe(ctx context.Context, w io.Writer, topicARN string, o topicsOptions) error {
	if !strings.HasPrefix(topicARN, "arn:") || strings.Count(topicARN, ":") != 5 {
		return cli.Usagef("%q is not a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", topicARN)
	}
	for _, t := range o.filter {
		if domain.KindOf(event.Type(t)) == nil {
			return cli.Usagef("--filter %q: junban knows no such event type", t)
		}
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	tcfg, err := config.Load[topics.Config]()
	if err != nil {
		return err
	}
	sq, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return err
	}
	sn, err := topics.NewClient(ctx, tcfg, cfg.Endpoint)
	if err != nil {
		return err
	}
	url, err := queue.ResolveURL(ctx, sq, cfg.OrdersQueue)
	if err != nil {
		return err
	}
	s, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topicARN, QueueURL: url, Raw: o.raw, Types: o.filter})
	if err != nil {
		return err
	}
	if o.asJSON {
		return cli.WriteJSON(w, s)
	}
	what := "exists"
	switch {
	case s.Created:
		what = "created"
	case len(s.Updated) > 0:
		what = "updated (" + strings.Join(s.Updated, ", ") + ")"
	}
	fmt.Fprintf(w, "subscription %s: %s\n", what, s.ARN)
	fmt.Fprintf(w, "queue policy statement %s: %s\n", s.PolicySid, map[bool]string{true: "set", false: "in place"}[s.PolicySet])
	if len(o.filter) > 0 {
		fmt.Fprintf(w, "only %s delivered: publishers must set the message attribute %q to the event type\n",
			strings.Join(o.filter, ", "), topics.TypeAttribute)
	}
	return nil
}
