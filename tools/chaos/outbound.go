package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// OutboundSettleTimeoutDefault bounds how long Check waits, after quiescence, for the
// relay to publish every outbox row and for the subscriber queue to fall quiet; what is
// not received by then is missing.
const OutboundSettleTimeoutDefault = 2 * time.Minute

// outboundRun is a run's outbound topic and the queue subscribed to it (raw), drained
// while the run goes on so that neither backs up.
type outboundRun struct {
	sn       *sns.Client
	topicARN string
	queueURL string

	// checking is set by Check: from then on the drain ends once the relay has published
	// every row and the queue is quiet.
	checking atomic.Bool
	done     chan struct{}
	mu       sync.Mutex
	got      []outboundcheck.Message
	err      error
}

// outboundOn tells whether the run has an SNS to publish outbound events to: an SNS
// endpoint beside the SQS one, or AWS itself (no endpoint for either).
func (c Config) outboundOn() bool { return c.SNSEndpoint != "" || c.SQS.Endpoint == "" }

// startOutbound creates the run's outbound topic and its subscriber queue (named after
// the run's queues) and returns the persist-worker's settings for it.
func (e *Env) startOutbound(ctx context.Context, name string) ([]string, error) {
	sn, err := topics.NewClient(ctx, topics.Config{Region: e.cfg.SQS.Region, Endpoint: e.cfg.SNSEndpoint}, e.cfg.SQS.Endpoint)
	if err != nil {
		return nil, err
	}
	o := &outboundRun{sn: sn, done: make(chan struct{})}
	if o.topicARN, err = topics.Ensure(ctx, sn, name+"-outbound"); err != nil {
		return nil, err
	}
	e.outbound = o
	q, err := e.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-outbound")})
	if err != nil {
		return nil, fmt.Errorf("chaos: outbound queue: %w", err)
	}
	o.queueURL = aws.ToString(q.QueueUrl)
	e.queues = append(e.queues, o.queueURL)
	if _, err := topics.Subscribe(ctx, sn, e.sqs, topics.Spec{TopicARN: o.topicARN, QueueURL: o.queueURL, Raw: true}); err != nil {
		return nil, err
	}
	e.logf("outbound topic %s, queue %s-outbound subscribed (raw)", o.topicARN, name)
	env := []string{"JUNBAN_OUTBOX_TOPIC_ARN=" + o.topicARN}
	if e.cfg.SNSEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_SNS="+e.cfg.SNSEndpoint)
	}
	return env, nil
}

// drainOutbound receives the subscriber queue's messages until Check says the run is
// over and the relay has published everything.
func (e *Env) drainOutbound(ctx context.Context) {
	o := e.outbound
	defer close(o.done)
	published := outboundcheck.Published(e.db)
	got, err := outboundcheck.Drain(ctx, e.sqs, o.queueURL, outboundcheck.DrainOptions{
		// PostgreSQL is stopped during the run: the outbox is read only once Check began.
		Settled: func(ctx context.Context) (bool, error) {
			if !o.checking.Load() {
				return false, nil
			}
			return published(ctx)
		},
	})
	o.mu.Lock()
	o.got, o.err = append(o.got, got...), err
	o.mu.Unlock()
}

// checkOutbound ends the drain (the first time; later, it drains again what came since)
// and checks what the subscriber received against the outbox.
func (e *Env) checkOutbound(ctx context.Context) (*outboundcheck.Report, error) {
	o := e.outbound
	settle, cancel := context.WithTimeout(ctx, e.cfg.OutboundSettleTimeout)
	defer cancel()
	if o.checking.CompareAndSwap(false, true) {
		select {
		case <-o.done:
		case <-settle.Done():
			// The drain's own context ends it with what it has.
			e.stopOutbound()
		}
	} else {
		got, err := outboundcheck.Drain(settle, e.sqs, o.queueURL, outboundcheck.DrainOptions{Settled: outboundcheck.Published(e.db)})
		o.mu.Lock()
		o.got, o.err = append(o.got, got...), err
		o.mu.Unlock()
	}
	o.mu.Lock()
	got, err := o.got, o.err
	o.mu.Unlock()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if err != nil {
		e.logf("outbound: the relay did not publish every row, or the queue did not fall quiet, within %s", e.cfg.OutboundSettleTimeout)
	}
	rep, err := outboundcheck.Check(ctx, e.db, got, outboundcheck.CheckOptions{})
	return &rep, err
}

// stopOutbound ends the drain and waits for it.
func (e *Env) stopOutbound() {
	if e.outbound == nil || e.stopDrain == nil {
		return
	}
	e.stopDrain()
	<-e.outbound.done
}

// deleteOutboundTopic removes the run's topic (its queue goes with the others).
func (e *Env) deleteOutboundTopic(ctx context.Context) {
	if e.outbound != nil && e.outbound.topicARN != "" {
		e.outbound.sn.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: aws.String(e.outbound.topicARN)})
	}
}
