package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/growstack"
	"github.com/junban/junban/internal/platform/tracing"
)

// Publisher defaults.
const (
	// MaxMessageSizeDefault is SQS's classic maximum message size (body plus attributes).
	MaxMessageSizeDefault = 256 * 1024
	// MaxBatchBytesDefault bounds one SendMessageBatch request's payload.
	MaxBatchBytesDefault = 256 * 1024
	// LingerDefault is how long a batch waits for more messages after its first one.
	LingerDefault = 2 * time.Millisecond
	// MaxInFlightBatchesDefault bounds concurrent SendMessageBatch calls of one Publisher.
	MaxInFlightBatchesDefault = 8
	// SendTimeoutDefault bounds one SendMessageBatch call, the SDK's own retries included.
	SendTimeoutDefault = 30 * time.Second
	// maxBatchEntries is SQS's limit of entries per batch request.
	maxBatchEntries = 10
)

var (
	// ErrTooLarge: a message (body plus attributes) exceeds the queue's maximum message
	// size. It is refused before sending, never truncated.
	ErrTooLarge = errors.New("queue: message too large")
	// ErrUncarriable: a body with a character SQS refuses (event.Carriable), refused here
	// as SQS would (InvalidMessageContents), whatever the emulator in front accepts.
	ErrUncarriable = errors.New("queue: a character SQS cannot carry")
	// ErrEmptyBody: SQS refuses messages without a body.
	ErrEmptyBody = errors.New("queue: empty message body")
	// ErrTooManyAttributes: a message carries more than SQS's ten attributes.
	ErrTooManyAttributes = errors.New("queue: too many message attributes")
	// ErrStopped: Publish after Stop.
	ErrStopped = errors.New("queue: publisher stopped")
	// errEarlierFailed answers the messages of a PublishBatch to a FIFO queue that were
	// not sent because an earlier one failed: sent, they would have overtaken it.
	errEarlierFailed = errors.New("queue: not sent: an earlier message of the batch failed, and a FIFO queue keeps their order")
)

// EntryError is the failure of one message of a PublishBatch, whose error joins one per
// message that was not accepted.
type EntryError struct {
	// Index is the message's place among PublishBatch's bodies.
	Index int
	// Code is SQS's error code for the message ("InvalidMessageContents"); empty when SQS
	// gave none (the message failed the publisher's own checks, or the call failed).
	Code string
	// Refused says the message can never be accepted as it is: SQS refused it as the
	// sender's fault, or it failed the publisher's checks (ErrTooLarge, ErrEmptyBody,
	// ErrTooManyAttributes, ErrNoGroupID, ErrNoDedupID). Sending it again fails again;
	// any other failure may pass on a later try.
	Refused bool
	Err     error
}

func (e *EntryError) Error() string { return fmt.Sprintf("message %d: %v", e.Index, e.Err) }

func (e *EntryError) Unwrap() error { return e.Err }

// EntryErrors returns the EntryErrors a PublishBatch error joins, by message index; a
// message without one was accepted. ok is false when err holds something else too (the
// caller's context ended): which messages SQS accepted is then unknown.
func EntryErrors(err error) (failed map[int]*EntryError, ok bool) {
	if err == nil {
		return nil, true
	}
	errs := []error{err}
	if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
		errs = j.Unwrap()
	}
	failed = make(map[int]*EntryError, len(errs))
	for _, e := range errs {
		var ee *EntryError
		if !errors.As(e, &ee) {
			return nil, false
		}
		failed[ee.Index] = ee
	}
	return failed, true
}

// sqsRefusal is SQS's answer failing one entry of a SendMessageBatch.
type sqsRefusal struct {
	queue, code, message string
	senderFault          bool
}

func (r *sqsRefusal) Error() string {
	return fmt.Sprintf("queue: publish to %s: %s: %s", r.queue, r.code, r.message)
}

// codeInvalidMessageContents is SQS's code for a body with a character it cannot carry.
const codeInvalidMessageContents = "InvalidMessageContents"

// entryError names message i's failure, and whether sending it again can help.
func entryError(i int, err error) *EntryError {
	e := &EntryError{Index: i, Err: err}
	var r *sqsRefusal
	switch {
	case errors.As(err, &r):
		e.Code, e.Refused = r.code, r.senderFault
	case errors.Is(err, ErrUncarriable):
		e.Code, e.Refused = codeInvalidMessageContents, true
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrEmptyBody), errors.Is(err, ErrTooManyAttributes),
		errors.Is(err, ErrNoGroupID), errors.Is(err, ErrNoDedupID):
		e.Refused = true
	}
	return e
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Client reaches SQS (required).
	Client *sqs.Client
	// QueueURL is the queue messages are sent to (required).
	QueueURL string
	// Name labels metrics and logs; default: the last path segment of QueueURL.
	Name string
	// Keys derives each message's group and deduplication ids from its body; required
	// for a FIFO queue (QueueURL ends in ".fifo"), unused for a standard one. A message
	// it gives no group id (or no deduplication id) fails with ErrNoGroupID
	// (ErrNoDedupID) before it is sent.
	Keys Keyer
	// MaxMessageSize is the queue's maximum message size in bytes, body plus attributes;
	// a larger message fails with ErrTooLarge. Default MaxMessageSizeDefault.
	MaxMessageSize int
	// MaxBatchBytes bounds the payload of one SendMessageBatch; it must be at least
	// MaxMessageSize. Default MaxBatchBytesDefault (or MaxMessageSize when larger).
	MaxBatchBytes int
	// Linger is how long a batch waits for more messages after its first one (up to ten
	// entries). Default LingerDefault.
	Linger time.Duration
	// MaxInFlightBatches bounds concurrent SendMessageBatch calls. Default MaxInFlightBatchesDefault.
	MaxInFlightBatches int
	// SendTimeout bounds one SendMessageBatch call. Default SendTimeoutDefault.
	SendTimeout time.Duration
	// Registerer receives the publisher's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger logs failed sends; nil logs nothing.
	Logger *zap.Logger
}

func (cfg *PublisherConfig) setDefaults() {
	if cfg.Name == "" {
		cfg.Name = queueName(cfg.QueueURL)
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = MaxMessageSizeDefault
	}
	if cfg.MaxBatchBytes == 0 {
		cfg.MaxBatchBytes = max(MaxBatchBytesDefault, cfg.MaxMessageSize)
	}
	if cfg.Linger == 0 {
		cfg.Linger = LingerDefault
	}
	if cfg.MaxInFlightBatches == 0 {
		cfg.MaxInFlightBatches = MaxInFlightBatchesDefault
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = SendTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
}

// Validate reports every invalid setting at once; zero values stand for the defaults.
func (cfg PublisherConfig) Validate() error {
	cfg.setDefaults()
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("Client is required"))
	}
	if cfg.QueueURL == "" {
		errs = append(errs, errors.New("QueueURL is required"))
	}
	if IsFIFO(cfg.QueueURL) && cfg.Keys == nil {
		errs = append(errs, fmt.Errorf("Keys is required: %s is a FIFO queue, whose messages need a group and a deduplication id", cfg.Name))
	}
	if cfg.MaxMessageSize < 1024 || cfg.MaxMessageSize > 1024*1024 {
		errs = append(errs, fmt.Errorf("MaxMessageSize %d outside SQS's 1024..1048576", cfg.MaxMessageSize))
	}
	if cfg.MaxBatchBytes < cfg.MaxMessageSize {
		errs = append(errs, fmt.Errorf("MaxBatchBytes %d below MaxMessageSize %d", cfg.MaxBatchBytes, cfg.MaxMessageSize))
	}
	if cfg.Linger < 0 {
		errs = append(errs, fmt.Errorf("Linger %v is negative", cfg.Linger))
	}
	if cfg.MaxInFlightBatches < 0 {
		errs = append(errs, fmt.Errorf("MaxInFlightBatches %d is negative", cfg.MaxInFlightBatches))
	}
	if cfg.SendTimeout < 0 {
		errs = append(errs, fmt.Errorf("SendTimeout %v is negative", cfg.SendTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("queue: publisher config: %w", errors.Join(errs...))
	}
	return nil
}

// Publisher sends messages to one queue. Concurrent Publish calls are gathered into
// SendMessageBatch requests (up to ten entries, or what arrived within Linger); each
// caller waits for its own entry's answer, so a nil error means SQS accepted that message.
// It is safe for concurrent use.
//
// On a FIFO queue every message carries the group and deduplication ids of
// PublisherConfig.Keys, and PublishBatch keeps its bodies' order (see there). A message
// SQS drops as a duplicate (its deduplication id was accepted within five minutes) is
// answered as accepted.
type Publisher struct {
	c    *sqs.Client
	cfg  PublisherConfig
	fifo bool
	m    *publisherMetrics
	log  *zap.Logger

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	reqs   chan []*pubEntry // entries that go into one batch together, in order
	loop   chan struct{}    // closed when the batching loop ended
	sends  sync.WaitGroup
	sem    chan struct{}
}

type pubEntry struct {
	body         string
	attrs        map[string]types.MessageAttributeValue
	group, dedup *string // a FIFO queue's ids; nil for a standard queue
	size         int
	at           time.Time  // its Publish (or PublishBatch)
	res          chan error // buffered: the sender never blocks on a caller that gave up
}

// NewPublisher returns a Publisher for cfg.QueueURL, its batcher running in the
// background, or an error naming what cfg lacks; Stop it to flush.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	m, err := newPublisherMetrics(cfg.Registerer, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("queue: publisher metrics: %w", err)
	}
	p := &Publisher{
		c: cfg.Client, cfg: cfg, fifo: IsFIFO(cfg.QueueURL), m: m,
		log:  cfg.Logger.With(zap.String("queue", cfg.Name)),
		reqs: make(chan []*pubEntry),
		loop: make(chan struct{}),
		sem:  make(chan struct{}, cfg.MaxInFlightBatches),
	}
	go p.run()
	return p, nil
}

// Publish sends one message with the given string attributes, plus the trace context of
// its send span (traceparent; internal/platform/tracing). It returns when SQS accepted or refused
// the message, or when ctx ends; in the last case the message may still be sent
// (at-least-once).
func (p *Publisher) Publish(ctx context.Context, body []byte, attrs map[string]string) (err error) {
	ctx, span := startSend(ctx, p.cfg.Name, 1)
	defer func() { endSend(span, err) }()
	e, err := p.prepare(ctx, body, attrs)
	if err != nil {
		p.m.publishErrors.Inc()
		return err
	}
	if err := p.enqueue(ctx, []*pubEntry{e}); err != nil {
		return err
	}
	select {
	case err := <-e.res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PublishBatch sends every body, each with the trace context of one send span for them
// all (traceparent). It returns one *EntryError per message that was not accepted,
// joined (EntryErrors reads them); the others were accepted. A message that can never be
// accepted (too large, or, on a FIFO queue, without ids; or refused by SQS as the
// sender's fault) fails alone, EntryError.Refused: the others are sent.
//
// On a FIFO queue the bodies keep their order: they go in SendMessageBatch calls of up to
// ten, one call after the other, and never split across two calls in flight at once (SQS
// orders a group's messages within a call by their place in it). After a call in which
// one failed, the rest are not sent, and fail too (not Refused): sent, they would overtake
// it, and PublishBatch does not know whether its caller gives it up.
func (p *Publisher) PublishBatch(ctx context.Context, bodies [][]byte) (err error) {
	ctx, span := startSend(ctx, p.cfg.Name, len(bodies))
	defer func() { endSend(span, err) }()
	entries := make([]*pubEntry, len(bodies))
	var errs []error
	for i, b := range bodies {
		e, err := p.prepare(ctx, b, nil)
		if err != nil {
			p.m.publishErrors.Inc()
			errs = append(errs, entryError(i, err))
			continue
		}
		entries[i] = e
	}
	if p.fifo {
		return errors.Join(append(errs, p.publishInOrder(ctx, entries)...)...)
	}
	for i, e := range entries {
		if e == nil {
			continue
		}
		if err := p.enqueue(ctx, []*pubEntry{e}); err != nil {
			errs = append(errs, entryError(i, err))
			entries[i] = nil
		}
	}
	for i, e := range entries {
		if e == nil {
			continue
		}
		select {
		case err := <-e.res:
			if err != nil {
				errs = append(errs, entryError(i, err))
			}
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		}
	}
	return errors.Join(errs...)
}

// publishInOrder sends entries (nil: refused before sending) as runs that each go into one
// batch, one run after the other, and stops after a run in which one failed.
func (p *Publisher) publishInOrder(ctx context.Context, entries []*pubEntry) []error {
	var errs []error
	for lo := 0; lo < len(entries); {
		if entries[lo] == nil {
			lo++
			continue
		}
		hi, size := lo, 0
		var run []*pubEntry
		at := map[*pubEntry]int{}
		for hi < len(entries) && len(run) < maxBatchEntries {
			if e := entries[hi]; e != nil {
				if size+e.size > p.cfg.MaxBatchBytes {
					break
				}
				size += e.size
				at[e] = hi
				run = append(run, e)
			}
			hi++
		}
		if err := p.enqueue(ctx, run); err != nil {
			for i := lo; i < len(entries); i++ {
				if entries[i] != nil {
					errs = append(errs, entryError(i, err))
				}
			}
			return errs
		}
		failed := false
		for _, e := range run {
			select {
			case err := <-e.res:
				if err != nil {
					failed = true
					errs = append(errs, entryError(at[e], err))
				}
			case <-ctx.Done():
				return append(errs, ctx.Err())
			}
		}
		lo = hi
		if failed && lo < len(entries) {
			for i := lo; i < len(entries); i++ {
				if entries[i] != nil {
					p.m.publishErrors.Inc()
					errs = append(errs, entryError(i, errEarlierFailed))
				}
			}
			break
		}
	}
	return errs
}

// Stop refuses later Publish calls with ErrStopped, sends what is pending and waits for
// every batch in flight, or until ctx ends: then it returns ctx's error and the batches
// still in flight finish in the background (each within SendTimeout). It is safe to call
// more than once.
func (p *Publisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.reqs)
	}
	p.mu.Unlock()
	flushed := make(chan struct{})
	go func() {
		<-p.loop
		p.sends.Wait()
		close(flushed)
	}()
	select {
	case <-flushed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("queue: publisher %s: stop: %w", p.cfg.Name, ctx.Err())
	}
}

func (p *Publisher) prepare(ctx context.Context, body []byte, attrs map[string]string) (*pubEntry, error) {
	if len(body) == 0 {
		return nil, ErrEmptyBody
	}
	all := attrs
	if trace.SpanContextFromContext(ctx).IsValid() {
		all = make(map[string]string, len(attrs)+2)
		maps.Copy(all, attrs)
		tracing.Inject(ctx, all)
	}
	if len(all) > MaxAttributes {
		return nil, fmt.Errorf("%w: %d, SQS allows %d", ErrTooManyAttributes, len(all), MaxAttributes)
	}
	sqsAttrs := toSQSAttributes(all)
	size := messageSize(body, sqsAttrs)
	if size > p.cfg.MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes (body %d), queue %s allows %d", ErrTooLarge, size, len(body), p.cfg.Name, p.cfg.MaxMessageSize)
	}
	if !event.Carriable(string(body)) {
		return nil, fmt.Errorf("%w: queue %s", ErrUncarriable, p.cfg.Name)
	}
	e := &pubEntry{body: string(body), attrs: sqsAttrs, size: size, at: time.Now(), res: make(chan error, 1)}
	if p.fifo {
		var k Keys
		var err error
		if k.Group, k.Dedup, err = p.cfg.Keys(body); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrNoGroupID, p.cfg.Name, err)
		}
		if e.group, e.dedup, err = k.For(p.cfg.QueueURL); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// enqueue hands the batcher a run of entries that go into one batch together (at most
// ten, within MaxBatchBytes).
func (p *Publisher) enqueue(ctx context.Context, run []*pubEntry) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrStopped
	}
	select {
	case p.reqs <- run:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run gathers entries into batches: a batch is sent when it holds ten entries, when the
// next run of entries would push it over ten or over MaxBatchBytes, or Linger after its
// first entry.
func (p *Publisher) run() {
	defer close(p.loop)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var batch []*pubEntry
	bytes := 0
	flush := func() {
		timer.Stop()
		if len(batch) == 0 {
			return
		}
		b := batch
		batch, bytes = nil, 0
		p.sem <- struct{}{}
		p.sends.Add(1)
		go func() {
			growstack.Grow()
			defer func() { <-p.sem; p.sends.Done() }()
			p.send(b)
		}()
	}
	for {
		var linger <-chan time.Time
		if len(batch) > 0 {
			linger = timer.C
		}
		select {
		case run, ok := <-p.reqs:
			if !ok {
				flush()
				return
			}
			size := 0
			for _, e := range run {
				size += e.size
			}
			if len(batch)+len(run) > maxBatchEntries || bytes+size > p.cfg.MaxBatchBytes {
				flush()
			}
			if len(batch) == 0 {
				timer.Reset(p.cfg.Linger)
			}
			batch, bytes = append(batch, run...), bytes+size
			if len(batch) == maxBatchEntries {
				flush()
			}
		case <-linger:
			flush()
		}
	}
}

func (p *Publisher) send(batch []*pubEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.SendTimeout)
	defer cancel()
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, e := range batch {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                     aws.String(strconv.Itoa(i)),
			MessageBody:            aws.String(e.body),
			MessageAttributes:      e.attrs,
			MessageGroupId:         e.group,
			MessageDeduplicationId: e.dedup,
		}
	}
	start := time.Now()
	for _, e := range batch {
		p.m.linger.Observe(start.Sub(e.at).Seconds())
	}
	out, err := p.c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(p.cfg.QueueURL), Entries: entries})
	end := time.Now()
	for _, e := range batch {
		p.m.publish.Observe(end.Sub(e.at).Seconds())
	}
	if err != nil {
		err = fmt.Errorf("queue: publish to %s: %w", p.cfg.Name, err)
		p.log.Warn("send batch failed", zap.Int("messages", len(batch)), zap.Error(err))
		p.m.publishErrors.Add(float64(len(batch)))
		for _, e := range batch {
			e.res <- err
		}
		return
	}
	answered := make([]bool, len(batch))
	for _, f := range out.Failed {
		i, convErr := strconv.Atoi(aws.ToString(f.Id))
		if convErr != nil || i < 0 || i >= len(batch) || answered[i] {
			continue
		}
		answered[i] = true
		p.m.publishErrors.Inc()
		batch[i].res <- &sqsRefusal{queue: p.cfg.Name, code: aws.ToString(f.Code), message: aws.ToString(f.Message), senderFault: f.SenderFault}
	}
	for _, s := range out.Successful {
		i, convErr := strconv.Atoi(aws.ToString(s.Id))
		if convErr != nil || i < 0 || i >= len(batch) || answered[i] {
			continue
		}
		answered[i] = true
		p.m.published.Inc()
		batch[i].res <- nil
	}
	for i, ok := range answered {
		if !ok {
			p.m.publishErrors.Inc()
			batch[i].res <- fmt.Errorf("queue: publish to %s: no answer for the entry", p.cfg.Name)
		}
	}
}
