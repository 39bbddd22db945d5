package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// topicsOptions are the flags of topics subscribe.
type topicsOptions struct {
	raw, asJSON, createQueue bool
	filter                   []string
	// queue is the queue to subscribe (a name or URL); "": the orders queue.
	queue string
	// rawSet is true when --raw was given: a queue other than the orders queue gets raw
	// delivery unless --raw=false says otherwise.
	rawSet bool
}

func topicsSubscribeCmd() *cobra.Command {
	var o topicsOptions
	c := &cobra.Command{
		Use:   "subscribe TOPIC_ARN [--queue NAME_OR_URL [--create-queue]] [--raw] [--filter TYPE,...] [--json]",
		Short: "subscribe the orders queue (or another) to an SNS topic and let the topic send to it (idempotent)",
		Long: "subscribe subscribes the orders queue (JUNBAN_ORDERS_QUEUE) to the SNS topic TOPIC_ARN, with raw\n" +
			"message delivery when --raw is given (without it the queue gets SNS notifications, which the\n" +
			"order-worker unwraps), and adds to the queue's policy the statement that lets the topic send to\n" +
			"it (sns.amazonaws.com, aws:SourceArn the topic; the policy's other statements are kept).\n\n" +
			"--queue NAME_OR_URL subscribes that queue instead, e.g. a consumer's queue on the outbound topic\n" +
			"(JUNBAN_OUTBOX_TOPIC_ARN); its delivery is raw, so that it gets the messages as published, unless\n" +
			"--raw=false. --create-queue creates it where it is missing (a name ending in .fifo: a FIFO queue,\n" +
			"which a FIFO topic needs).\n\n" +
			"--filter TYPE,... sets a filter policy on the message attribute \"" + topics.TypeAttribute + "\": only those event\n" +
			"types are delivered, so publishers must set that attribute to the event's type (a message\n" +
			"without it is dropped by the filter). Run again, it finds the subscription and sets what\n" +
			"differs: one subscription and one policy statement per topic.",
		Args: cli.OneArg("TOPIC_ARN"),
		RunE: func(c *cobra.Command, args []string) error {
			o.rawSet = c.Flags().Changed("raw")
			return runTopicsSubscribe(c.Context(), c.OutOrStdout(), args[0], o)
		},
	}
	fs := c.Flags()
	fs.BoolVar(&o.raw, "raw", false, "raw message delivery: the queue gets the message alone, not the SNS notification (default with --queue)")
	fs.StringVar(&o.queue, "queue", "", "subscribe this queue (name or URL) instead of the orders queue; raw delivery unless --raw=false")
	fs.BoolVar(&o.createQueue, "create-queue", false, "with --queue: create the queue where it is missing")
	fs.StringSliceVar(&o.filter, "filter", nil, "deliver only these event types (filter policy on the message attribute \"type\")")
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	return c
}

// runTopicsSubscribe subscribes the orders queue to topicARN. It is idempotent.
func runTopicsSubscribe(ctx context.Context, w io.Writer, topicARN string, o topicsOptions) error {
	if !strings.HasPrefix(topicARN, "arn:") || strings.Count(topicARN, ":") != 5 {
		return cli.Usagef("%q is not a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", topicARN)
	}
	if o.createQueue && o.queue == "" {
		return cli.Usagef("--create-queue needs --queue")
	}
	if o.queue != "" && !o.rawSet {
		o.raw = true
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
	url, err := subscriberURL(ctx, sq, cfg.OrdersQueue, o)
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
	fmt.Fprintf(w, "subscription %s: %s (queue %s, raw delivery %t)\n", what, s.ARN, url, o.raw)
	fmt.Fprintf(w, "queue policy statement %s: %s\n", s.PolicySid, map[bool]string{true: "set", false: "in place"}[s.PolicySet])
	if len(o.filter) > 0 {
		fmt.Fprintf(w, "only %s delivered: publishers must set the message attribute %q to the event type\n",
			strings.Join(o.filter, ", "), topics.TypeAttribute)
	}
	return nil
}

// subscriberURL is the URL of the queue topics subscribe subscribes: --queue's (created
// where missing with --create-queue), else the orders queue.
func subscriberURL(ctx context.Context, sq *sqs.Client, ordersQueue string, o topicsOptions) (string, error) {
	if o.queue == "" {
		return queue.ResolveURL(ctx, sq, ordersQueue)
	}
	if !o.createQueue || strings.HasPrefix(o.queue, "http://") || strings.HasPrefix(o.queue, "https://") {
		return queue.ResolveURL(ctx, sq, o.queue)
	}
	in := &sqs.CreateQueueInput{QueueName: aws.String(o.queue)}
	if queue.IsFIFO(o.queue) {
		in.Attributes = map[string]string{"FifoQueue": "true"}
	}
	// CreateQueue returns the URL of a queue of that name with the same attributes.
	out, err := sq.CreateQueue(ctx, in)
	if err != nil {
		return "", fmt.Errorf("topics subscribe: create queue %s: %w", o.queue, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func topicsCreateCmd() *cobra.Command {
	var fifo, asJSON bool
	c := &cobra.Command{
		Use:   "create NAME [--fifo] [--json]",
		Short: "create an SNS topic where it is missing and print its ARN (idempotent)",
		Long: "create creates the SNS topic NAME (CreateTopic: an existing topic of that name is found, not\n" +
			"made again) and prints its ARN, e.g. the outbound topic the persist-worker publishes to\n" +
			"(JUNBAN_OUTBOX_TOPIC_ARN). --fifo makes a FIFO topic, \".fifo\" added to NAME where it lacks it;\n" +
			"a NAME ending in .fifo is a FIFO topic anyway.",
		Args: cli.OneArg("NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			return runTopicsCreate(c.Context(), c.OutOrStdout(), args[0], fifo, asJSON)
		},
	}
	c.Flags().BoolVar(&fifo, "fifo", false, "a FIFO topic (\".fifo\" added to NAME where it lacks it)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the topic as JSON")
	return c
}

// topicReport is what topics create prints with --json.
type topicReport struct {
	// Name is the topic's name, ".fifo" included.
	Name string `json:"name"`
	// ARN is the topic's ARN.
	ARN string `json:"topic_arn"`
	// FIFO is true for a FIFO topic.
	FIFO bool `json:"fifo"`
}

// topicNameRE is what SNS takes as a topic name (".fifo" apart).
var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,251}$`)

// runTopicsCreate creates the topic name where it is missing and prints its ARN.
func runTopicsCreate(ctx context.Context, w io.Writer, name string, fifo, asJSON bool) error {
	if fifo || strings.HasSuffix(name, queue.FIFOSuffix) {
		name, fifo = strings.TrimSuffix(name, queue.FIFOSuffix)+queue.FIFOSuffix, true
	}
	if !topicNameRE.MatchString(strings.TrimSuffix(name, queue.FIFOSuffix)) {
		return cli.Usagef("%q is not a topic name (letters, digits, - and _, at most 256 with .fifo)", name)
	}
	cfg, err := config.Load[config.SQS]()
	if err != nil {
		return err
	}
	tcfg, err := config.Load[topics.Config]()
	if err != nil {
		return err
	}
	sn, err := topics.NewClient(ctx, tcfg, cfg.Endpoint)
	if err != nil {
		return err
	}
	in := &sns.CreateTopicInput{Name: aws.String(name)}
	if fifo {
		in.Attributes = map[string]string{"FifoTopic": "true"}
	}
	out, err := sn.CreateTopic(ctx, in)
	if err != nil {
		return fmt.Errorf("topics create %s: %w", name, err)
	}
	rep := topicReport{Name: name, ARN: aws.ToString(out.TopicArn), FIFO: fifo}
	if asJSON {
		return cli.WriteJSON(w, rep)
	}
	_, err = fmt.Fprintln(w, rep.ARN)
	return err
}
