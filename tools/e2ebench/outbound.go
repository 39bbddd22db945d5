package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// outboundSettleTimeout bounds the wait, after the load, for the relay to publish every
// outbox row and the subscriber queue to fall quiet.
const outboundSettleTimeout = 2 * time.Minute

// outboundDrain is a measurement's outbound topic and the queue subscribed to it, drained
// while the load runs so that neither SNS nor the queue backs up.
type outboundDrain struct {
	sn       *sns.Client
	sq       *sqs.Client
	topicARN string
	queueURL string
	// env is what the fleet needs to publish to the topic.
	env []string

	loadDone atomic.Bool
	stop     context.CancelFunc
	done     chan struct{}
	got      []outboundcheck.Message
	err      error
}

// startOutbound creates the topic and queue run+"-outbound", subscribes the queue raw and
// starts draining it; the persist-worker's relay publishes to the topic with env.
func startOutbound(ctx context.Context, cfg Config, sq *sqs.Client, run string, db *gorm.DB) (*outboundDrain, error) {
	sn, err := topics.NewClient(ctx, topics.Config{Region: cfg.Region, Endpoint: cfg.SNSEndpoint}, cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	o := &outboundDrain{sn: sn, sq: sq, done: make(chan struct{})}
	if o.topicARN, err = topics.Ensure(ctx, sn, run+"-outbound"); err != nil {
		return nil, err
	}
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(run + "-outbound")})
	if err != nil {
		o.close()
		return nil, fmt.Errorf("bench e2e: outbound queue: %w", err)
	}
	o.queueURL = aws.ToString(q.QueueUrl)
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: o.topicARN, QueueURL: o.queueURL, Raw: true}); err != nil {
		o.close()
		return nil, err
	}
	o.env = []string{"JUNBAN_OUTBOX_TOPIC_ARN=" + o.topicARN}
	if cfg.SNSEndpoint != "" {
		o.env = append(o.env, "AWS_ENDPOINT_URL_SNS="+cfg.SNSEndpoint)
	}
	drainCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	o.stop = stop
	published := outboundcheck.Published(db)
	go func() {
		defer close(o.done)
		o.got, o.err = outboundcheck.Drain(drainCtx, sq, o.queueURL, outboundcheck.DrainOptions{
			Settled: func(ctx context.Context) (bool, error) {
				if !o.loadDone.Load() {
					return false, nil
				}
				return published(ctx)
			},
		})
	}()
	return o, nil
}

// check waits, once the load is over, for the relay to publish everything and the queue
// to fall quiet (at most outboundSettleTimeout), and checks what the queue got.
func (o *outboundDrain) check(ctx context.Context, db *gorm.DB) (*outboundcheck.Report, error) {
	o.loadDone.Store(true)
	select {
	case <-o.done:
	case <-time.After(outboundSettleTimeout):
		o.stop()
		<-o.done
	case <-ctx.Done():
		o.stop()
		<-o.done
		return nil, ctx.Err()
	}
	if o.err != nil && !errors.Is(o.err, context.Canceled) {
		return nil, o.err
	}
	rep, err := outboundcheck.Check(ctx, db, o.got, outboundcheck.CheckOptions{})
	return &rep, err
}

// close ends the drain and deletes the queue and the topic.
func (o *outboundDrain) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o.stop != nil {
		o.stop()
		<-o.done
	}
	if o.queueURL != "" {
		o.sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(o.queueURL)})
	}
	o.sn.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(o.topicARN)})
}

// printSideBySide writes the two measurements, outbound events off and on, a column each.
func printSideBySide(w io.Writer, off, on *figures) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\toutbound off\toutbound on")
	row := func(name string, f func(*figures) string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(off), f(on)) }
	row("events (distinct)", func(f *figures) string { return fmt.Sprint(f.s.Distinct) })
	row("events/s send -> commit", func(f *figures) string { return fmt.Sprintf("%.1f", f.s.EventsPerS) })
	row("SQS ceiling msg/s", func(f *figures) string { return fmt.Sprintf("%.1f", f.ceiling) })
	row("latency p50 / p99 at capacity", func(f *figures) string { return fmt.Sprintf("%.0f / %.0f ms", f.s.P50MS, f.s.P99MS) })
	row("latency rate events/s", func(f *figures) string { return fmt.Sprintf("%.0f", f.latRate) })
	row("  in turn p50 / p99", func(f *figures) string { return fmt.Sprintf("%.0f / %.0f ms", f.inTurn.P50MS, f.inTurn.P99MS) })
	row("  target p99", func(f *figures) string {
		return fmt.Sprintf("< %d ms %s", latencyTargetP99.Milliseconds(), verdict(f.latOK()))
	})
	tw.Flush()
	if o := on.outbound; o != nil {
		fmt.Fprintf(w, "\noutbound (on): %d messages received, %d distinct, %d copies; %d rows; missing %d, unknown %d, gaps %d, invalid %d",
			o.Received, o.Distinct, o.Duplicates.Count, o.Rows, o.Missing.Count, o.Unknown.Count, o.Gaps.Count, o.Invalid.Count)
		if p := o.Problems(); len(p) > 0 {
			fmt.Fprintf(w, " -> FAILED: %s\n", strings.Join(p, "; "))
		} else {
			fmt.Fprintln(w, " -> ok")
		}
	}
}
