package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/config"
	"github.com/junban/junban/internal/queue"
)

// errRedriveIntoDLQ: a redrive target is the dead-letter queue itself. Moving a message
// there re-sends it into the queue it is being taken from, forever.
var errRedriveIntoDLQ = errors.New("redrive target is the dead-letter queue itself")

// redriveVisibility is how long, in seconds, redrive hides a message it received. A moved
// message is deleted well within it; a message it leaves in the DLQ (a repeat) stays
// hidden for the rest of the run, so that later receives bring the others, and is made
// visible again when the run ends (or when this passes, if the run dies). Five minutes
// cover a run of some ten thousand messages; a longer one can end early, saying so in
// its depths, and the next run goes on.
const redriveVisibility = 300

// servedQueue returns the queue the dead-letter queue dlq serves, as far as the
// configuration or its name ("X-dlq" serves "X") tells; "" when neither does.
func servedQueue(cfg config.SQS, dlq string) string {
	switch {
	case dlq == cfg.OrdersDLQ:
		return cfg.OrdersQueue
	case dlq == cfg.ResultsDLQ:
		return cfg.ResultsQueue
	case strings.HasSuffix(dlq, "-dlq"):
		return strings.TrimSuffix(dlq, "-dlq")
	}
	return ""
}

// queueState returns a queue's ARN and its depth: its visible, in-flight and delayed messages.
func queueState(ctx context.Context, c *sqs.Client, url string) (string, int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameQueueArn,
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return "", 0, fmt.Errorf("attributes of %s: %w", url, err)
	}
	n := 0
	for _, a := range []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	} {
		v, _ := strconv.Atoi(out.Attributes[string(a)])
		n += v
	}
	return out.Attributes[string(types.QueueAttributeNameQueueArn)], n, nil
}

// receiveDLQ takes up to maxN (at most 10) messages, with their attributes, hidden for
// visibility seconds.
func receiveDLQ(ctx context.Context, c *sqs.Client, url string, maxN, visibility int32) ([]types.Message, error) {
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: min(maxN, 10), WaitTimeSeconds: 1,
		VisibilityTimeout:     visibility,
		MessageAttributeNames: []string{"All"},
		AttributeNames:        []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// release makes received messages visible again, ignoring handles that no longer hold.
func release(ctx context.Context, c *sqs.Client, url string, handles []string) {
	ctx = context.WithoutCancel(ctx)
	for _, h := range handles {
		c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: aws.String(h), VisibilityTimeout: 0})
	}
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE ID\tRECEIVES\tREASON\tBODY")
	seen := map[string]bool{}
	var handles []string
	// Listing hides the messages while it reads; they are made visible again at the end.
	defer func() { release(ctx, c, url, handles) }()
	for len(seen) < *maxN {
		ms, err := receiveDLQ(ctx, c, url, 10, 30)
		if err != nil {
			return err
		}
		fresh := 0
		for _, m := range ms {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			id := aws.ToString(m.MessageId)
			if seen[id] || len(seen) >= *maxN {
				continue
			}
			seen[id] = true
			fresh++
			body := aws.ToString(m.Body)
			if *width > 0 && len(body) > *width {
				body = body[:*width] + "..."
			}
			reason := ""
			if a, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
				reason = aws.ToString(a.StringValue)
			}
			if reason == "" {
				reason = "(redrive policy: maxReceiveCount)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, m.Attributes["ApproximateReceiveCount"], reason, body)
		}
		if fresh == 0 {
			break
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%d message(s) in %s\n", len(seen), *name)
	return nil
}

// redriveReport is what one redrive run did.
type redriveReport struct {
	// DLQ is the dead-letter queue as given.
	DLQ string
	// Depth is the DLQ's depth at the start: visible, in flight and delayed messages.
	Depth int
	// Limit is the most the run moves: Depth, or --max when that is lower.
	Limit int
	// Moved counts the moved messages by the name of the queue they went to.
	Moved map[string]int
	// Repeats counts the messages left in the DLQ because their body was moved earlier in
	// the run: messages that failed again and came back, or duplicates.
	Repeats int
	// BadSource counts the messages left because their junban-source-queue names the DLQ
	// itself or a queue that cannot be resolved.
	BadSource int
	// Left is the DLQ's depth at the end, -1 if it could not be read.
	Left int
}

// Total is the number of messages moved.
func (r redriveReport) Total() int {
	n := 0
	for _, v := range r.Moved {
		n += v
	}
	return n
}

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

// redriver resolves where the messages of one dead-letter queue go.
type redriver struct {
	c      *sqs.Client
	dlqARN string
	urls   map[string]string
}

// target returns the URL of the queue given by name or URL, and errRedriveIntoDLQ when
// that is the DLQ itself. The queues are compared by ARN, so that a name and a URL of one
// queue, or two spellings of its URL, are found equal.
func (r *redriver) target(ctx context.Context, nameOrURL string) (string, error) {
	if u, ok := r.urls[nameOrURL]; ok {
		return u, nil
	}
	u, err := queue.ResolveURL(ctx, r.c, nameOrURL)
	if err != nil {
		return "", err
	}
	arn, _, err := queueState(ctx, r.c, u)
	if err != nil {
		return "", err
	}
	if arn == r.dlqARN {
		return "", fmt.Errorf("%w: %s", errRedriveIntoDLQ, nameOrURL)
	}
	r.urls[nameOrURL] = u
	return u, nil
}

func runDLQRedrive(ctx context.Context, args []string) error {
	rep, err := dlqRedrive(ctx, args)
	if rep.DLQ != "" {
		rep.print(os.Stdout)
	}
	return err
}

// dlqRedrive moves messages from a dead-letter queue back to the queue each came from:
// the one its attribute "junban-source-queue" names, else --to, else the queue the DLQ
// serves. It deletes each from the DLQ only after the target accepted it.
//
// One run cannot loop, even when the messages fail again at once and come back while it
// runs: it moves at most the DLQ's depth at its start (at least one receive's worth, as
// SQS's depth is approximate; --max lowers it), moves a body at most once (a message whose
// body it already moved is left in the DLQ, hidden while the run goes on and visible again
// when it ends), and ends at the first receive that brings no message it has not seen, or
// after reading twice the limit. It refuses a target that is the DLQ itself; a message
// whose junban-source-queue cannot be used is left in the DLQ, counted, and makes the run
// fail once the others are moved.
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
	*name = cmp.Or(*name, cfg.OrdersDLQ)
	fallback := *to
	if fallback == "" {
		if fallback = servedQueue(cfg, *name); fallback == "" {
			return redriveReport{}, fmt.Errorf("%w: dlq redrive: %s is neither JUNBAN_ORDERS_DLQ nor JUNBAN_RESULTS_DLQ nor named X-dlq, so the queue it serves is unknown: give --to", errUsage, *name)
		}
	}
	c, err := queue.NewClient(ctx, cfg)
	if err != nil {
		return redriveReport{}, err
	}
	dlqURL, err := queue.ResolveURL(ctx, c, *name)
	if err != nil {
		return redriveReport{}, err
	}
	dlqARN, depth, err := queueState(ctx, c, dlqURL)
	if err != nil {
		return redriveReport{}, err
	}
	r := &redriver{c: c, dlqARN: dlqARN, urls: map[string]string{}}
	fallbackURL, err := r.target(ctx, fallback)
	if errors.Is(err, errRedriveIntoDLQ) {
		return redriveReport{}, fmt.Errorf("%w: dlq redrive --queue %s: %w; give --to the queue it serves", errUsage, *name, err)
	}
	if err != nil {
		return redriveReport{}, err
	}

	rep := redriveReport{DLQ: *name, Depth: depth, Limit: max(depth, 10), Moved: map[string]int{}, Left: -1}
	if *maxN > 0 {
		rep.Limit = min(*maxN, rep.Limit)
	}
	// Moved bodies, by hash: a message that comes back from its queue is recognised by
	// its body alone. Its attributes do not survive every way back (the order-worker
	// dead-letters a parked event without them), and its reason may differ the second time.
	movedBodies := map[[sha256.Size]byte]bool{}
	seen := map[string]bool{} // every message id received
	var badSource error       // the first junban-source-queue that could not be used
	var handBack []string
	defer func() { release(ctx, c, dlqURL, handBack) }()
	for rep.Total() < rep.Limit && len(seen) < 2*rep.Limit {
		ms, err := receiveDLQ(ctx, c, dlqURL, int32(min(rep.Limit-rep.Total(), 10)), redriveVisibility)
		if err != nil {
			return rep, fmt.Errorf("redrive: moved %d, then: %w", rep.Total(), err)
		}
		fresh := false
		for i, m := range ms {
			id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
			if seen[id] {
				// The emulator may return one message twice in one answer.
				continue
			}
			seen[id], fresh = true, true
			sum := sha256.Sum256([]byte(aws.ToString(m.Body)))
			if movedBodies[sum] || rep.Total() >= rep.Limit {
				if movedBodies[sum] {
					rep.Repeats++
				}
				handBack = append(handBack, handle)
				continue
			}
			target := fallbackURL
			if src := aws.ToString(m.MessageAttributes[queue.AttrSourceQueue].StringValue); src != "" {
				if target, err = r.target(ctx, src); err != nil {
					var gone *types.QueueDoesNotExist
					if !errors.Is(err, errRedriveIntoDLQ) && !errors.As(err, &gone) {
						// Throttling, the network: not the message's fault; stop here.
						for _, rest := range ms[i:] {
							handBack = append(handBack, aws.ToString(rest.ReceiptHandle))
						}
						return rep, fmt.Errorf("redrive: moved %d, then message %s (%s %q): %w", rep.Total(), id, queue.AttrSourceQueue, src, err)
					}
					rep.BadSource++
					badSource = cmp.Or(badSource, fmt.Errorf("message %s (%s %q): %w", id, queue.AttrSourceQueue, src, err))
					handBack = append(handBack, handle)
					continue
				}
			}
			attrs := map[string]types.MessageAttributeValue{}
			for k, v := range m.MessageAttributes {
				if k != queue.AttrDLQReason && k != queue.AttrSourceQueue {
					attrs[k] = v
				}
			}
			if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(target), MessageBody: m.Body, MessageAttributes: attrs}); err != nil {
				for _, rest := range ms[i:] {
					handBack = append(handBack, aws.ToString(rest.ReceiptHandle))
				}
				return rep, fmt.Errorf("redrive: moved %d, then: %w", rep.Total(), err)
			}
			movedBodies[sum] = true
			rep.Moved[path.Base(target)]++
			// Sent: the delete must happen even if the run is interrupted now.
			if _, err := c.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{QueueUrl: aws.String(dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				for _, rest := range ms[i+1:] {
					handBack = append(handBack, aws.ToString(rest.ReceiptHandle))
				}
				return rep, fmt.Errorf("redrive: moved %d (the last one may come again), then: %w", rep.Total(), err)
			}
		}
		// A receive that brings nothing new ends the run. The messages left so far are
		// hidden until it ends, so each receive brings others while there are any.
		if !fresh {
			break
		}
	}
	release(ctx, c, dlqURL, handBack)
	handBack = nil
	if _, n, err := queueState(ctx, c, dlqURL); err == nil {
		rep.Left = n
	}
	if badSource != nil {
		return rep, fmt.Errorf("redrive: left %d message(s) whose %s cannot be used (give them a queue by hand), the first: %w", rep.BadSource, queue.AttrSourceQueue, badSource)
	}
	return rep, nil
}
