package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/growstack"
	"github.com/junban/junban/internal/platform/tracing"
)

// ErrRunning: Run was called while the Consumer was already running.
var ErrRunning = errors.New("queue: consumer already running")

// errStopped answers deletes asked for after Run ended; the message comes back from SQS.
var errStopped = errors.New("queue: consumer stopped")

// DeadLetterGroup is the group id of a Poison message's copy in a FIFO DLQ when the
// message came without one (a FIFO queue's messages always carry theirs).
const DeadLetterGroup = "junban-dead-letter"

// Consumer receives messages from one queue and settles each by its handler's Outcome:
// Done deletes it, Retry makes it visible again after a backoff, Poison sends it to the
// dead-letter queue and then deletes it. A message is deleted only after its handler
// answered Done or after its copy reached the DLQ, so an error anywhere leaves it in SQS
// (invariant "no lost event"). SQS delivers at least once, and the local emulator may
// even return one message twice in one response: handlers must be idempotent.
//
// On a FIFO queue a Consumer's handlers see each group's messages in the group's order:
// the messages one receive brings of a group are handled one after the other (see
// handleGroup), and SQS delivers none of a group while one of its messages is in flight.
// A batch consumer hands them to its BatchHandler in that order.
type Consumer struct {
	c    *sqs.Client
	cfg  ConsumerConfig
	fifo bool
	h    Handler
	bh   BatchHandler
	m    *consumerMetrics
	log  *zap.Logger

	running atomic.Bool
}

// NewConsumer returns a Consumer that hands every message to cfg.Handler, up to
// cfg.Concurrency at once, or an error naming what cfg lacks.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	var p []error
	if cfg.Handler == nil {
		p = append(p, errors.New("queue: consumer: Handler is required"))
	}
	if cfg.BatchHandler != nil {
		p = append(p, errors.New("queue: consumer: BatchHandler is NewBatchConsumer's"))
	}
	return newConsumer(cfg, p)
}

// NewBatchConsumer returns a Consumer that collects up to cfg.BatchMax messages (from one
// or more receives, within cfg.BatchWindow of the first) and hands them to one bh call,
// up to cfg.Concurrency calls at once. A batch waits for company only while a call is in
// flight or its receives come back full (a backlog): a part-full receive with no call in
// flight goes at once, and a batch collecting goes when the calls in flight returned. cfg.Receivers receives stay in flight and fill one
// batch at a time between them, so that batches stay large whatever the number of
// receivers.
func NewBatchConsumer(cfg ConsumerConfig) (*Consumer, error) {
	var p []error
	if cfg.BatchHandler == nil {
		p = append(p, errors.New("queue: consumer: BatchHandler is required"))
	}
	if cfg.Handler != nil {
		p = append(p, errors.New("queue: consumer: Handler is NewConsumer's"))
	}
	return newConsumer(cfg, p)
}

// newConsumer checks the dependencies and then the settings (ConsumerConfig.Validate,
// which a configuration without them can be checked with), reporting every problem.
func newConsumer(cfg ConsumerConfig, problems []error) (*Consumer, error) {
	if cfg.Client == nil {
		problems = append(problems, errors.New("queue: consumer: Client is required"))
	}
	bh := cfg.BatchHandler
	cfg.setDefaults(bh != nil)
	if err := errors.Join(append(problems, cfg.Validate())...); err != nil {
		return nil, err
	}
	m, err := newConsumerMetrics(cfg.Registerer, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("queue: consumer metrics: %w", err)
	}
	return &Consumer{c: cfg.Client, cfg: cfg, fifo: IsFIFO(cfg.QueueURL), h: cfg.Handler, bh: bh, m: m, log: cfg.Logger.With(zap.String("queue", cfg.Name))}, nil
}

// HandlerBudget is how long after a shutdown began handlers may still run, within a
// ShutdownBudget of budget: the rest is kept for handing messages back and the last
// deletes. Work a handler started and that outlives it (a detached turn) should be
// bounded by the same.
func HandlerBudget(budget time.Duration) time.Duration {
	return budget - min(budget/5, 2*time.Second)
}

// Run consumes until ctx ends, then shuts down gracefully: it stops receiving, waits up to
// cfg.ShutdownBudget for the handlers in flight, then cancels their contexts and hands
// their messages back to SQS (visibility 0) so another consumer gets them at once. It
// returns nil after such a shutdown, or an error if it could not start.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer c.running.Store(false)

	vis := c.cfg.VisibilityTimeout
	if vis == 0 {
		var err error
		if vis, err = c.queueVisibility(ctx); err != nil {
			return err
		}
	}
	hb := c.cfg.HeartbeatInterval
	if hb == 0 {
		hb = vis / 3
	}
	if hb >= vis {
		return fmt.Errorf("queue: HeartbeatInterval %v must be shorter than the visibility timeout %v of %s", hb, vis, c.cfg.Name)
	}
	// Handlers and SQS calls outlive ctx: the shutdown budget, not ctx, ends them.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	ioctx, iocancel := context.WithCancel(context.WithoutCancel(ctx))
	defer iocancel()
	r := &run{
		Consumer: c,
		vis:      vis,
		hbEvery:  hb,
		hctx:     hctx,
		ioctx:    ioctx,
		sem:      make(chan struct{}, c.cfg.Concurrency),
		tracked:  make(map[string]*tracked),
		deletes:  make(chan deleteReq),
		stopped:  make(chan struct{}),
		pace:     newPacer(c.cfg.ReceiveLinger, c.cfg.Receivers),
	}
	var bg sync.WaitGroup
	bg.Add(2)
	hbStop := make(chan struct{})
	var hbOnce sync.Once
	stopHeartbeat := func() { hbOnce.Do(func() { close(hbStop) }) }
	go func() { defer bg.Done(); r.deleteLoop() }()
	go func() { defer bg.Done(); r.heartbeatLoop(hbStop) }()

	c.log.Info("consumer started", zap.Int("concurrency", c.cfg.Concurrency), zap.Duration("visibility", vis), zap.Bool("batch", c.bh != nil))
	if c.bh != nil {
		r.receiveBatches(ctx)
	} else {
		var loops sync.WaitGroup
		for range c.cfg.Receivers {
			loops.Go(func() { r.receiveLoop(ctx) })
		}
		loops.Wait()
	}

	// Shutdown: no more receives from here on.
	start := time.Now()
	budget := c.cfg.ShutdownBudget
	reserve := budget - HandlerBudget(budget) // for handing back and the last deletes
	// No SQS call (a delete, a dead-letter send) may keep Run past its budget; one cut
	// short leaves its message in SQS, which redelivers it.
	cutIO := time.AfterFunc(budget, iocancel)
	defer cutIO.Stop()
	finished := make(chan struct{})
	go func() { r.handlers.Wait(); close(finished) }()
	timer := time.NewTimer(budget - reserve)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		hcancel()
		stopHeartbeat()
		n := r.handBack()
		c.log.Warn("shutdown budget spent; handed back unfinished messages", zap.Int("messages", n), zap.Duration("budget", budget))
		// Handlers that honour their cancelled context may still answer Done; their
		// deletes go through until the budget ends.
		last := time.NewTimer(max(budget-time.Since(start), 0))
		select {
		case <-finished:
		case <-last.C:
		}
		last.Stop()
	}
	stopHeartbeat()
	close(r.stopped)
	bg.Wait()
	c.log.Info("consumer stopped", zap.Duration("shutdown", time.Since(start)))
	return nil
}

func (c *Consumer) queueVisibility(ctx context.Context) (time.Duration, error) {
	out, err := c.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(c.cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout},
	})
	if err != nil {
		return 0, fmt.Errorf("queue: visibility timeout of %s: %w", c.cfg.Name, err)
	}
	s, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	if err != nil || s < 1 {
		return 0, fmt.Errorf("queue: visibility timeout of %s is %q; set ConsumerConfig.VisibilityTimeout", c.cfg.Name, out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
	}
	return time.Duration(s) * time.Second, nil
}

// RetryDelay is the default backoff of a Retry for a message received receiveCount times:
// base * 2^(receiveCount-1), capped at maxDelay, with "equal jitter" (a uniformly random
// point in the upper half), so the n-th retry waits between half and all of its step.
// The result never exceeds maxDelay nor SQS's 12 h. The step is the receiveCount-th
// interval of a backoff.ExponentialBackOff; the jitter is its randomization by a third
// around three quarters of the step.
func RetryDelay(receiveCount int, base, maxDelay time.Duration) time.Duration {
	maxDelay = min(maxDelay, maxVisibility)
	if base <= 0 || maxDelay <= 0 {
		return 0
	}
	steps := &backoff.ExponentialBackOff{InitialInterval: base, Multiplier: 2, MaxInterval: maxDelay}
	step := steps.NextBackOff()
	for i := 1; i < receiveCount && step < maxDelay; i++ {
		step = steps.NextBackOff()
	}
	step = min(step, maxDelay)
	jitter := &backoff.ExponentialBackOff{InitialInterval: step - step/4, RandomizationFactor: 1.0 / 3, Multiplier: 1, MaxInterval: step}
	// The clamp absorbs the float rounding of the randomization at the interval's ends.
	return min(max(jitter.NextBackOff(), step/2), step)
}

// tracked is one received message from receive until it is settled.
type tracked struct {
	id string
	// The fields below are guarded by run.mu.
	receipt    string    // the newest receipt handle
	extended   time.Time // when its visibility was last set
	settled    bool      // its handler answered (or it was handed back): no more heartbeats
	handedBack bool
}

type deleteReq struct {
	t   *tracked
	res chan error
}

// run is one Run's state.
type run struct {
	*Consumer
	vis      time.Duration
	hbEvery  time.Duration
	hctx     context.Context // handlers' context, cancelled when the shutdown budget is spent
	ioctx    context.Context // SQS calls after receive
	sem      chan struct{}   // one token per running handler (or batch call)
	handlers sync.WaitGroup

	mu      sync.Mutex
	tracked map[string]*tracked // by message ID

	// fillMu lets one receive loop at a time take slots (see slots).
	fillMu sync.Mutex
	// pace bounds the receives in flight by their fill; nil without ReceiveLinger.
	pace *pacer

	// visMu orders visibility changes: a heartbeat in flight cannot undo a Retry's
	// backoff or a hand-back that was decided after it.
	visMu sync.Mutex

	deletes chan deleteReq
	stopped chan struct{} // closed when Run no longer serves deletes
}

func (r *run) receive(ctx context.Context, n int, wait int) ([]types.Message, error) {
	in := &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(r.cfg.QueueURL),
		MaxNumberOfMessages: int32(n),
		WaitTimeSeconds:     int32(wait),
		// Only the receive count, the X-Ray trace header and the send time are read: asking
		// for every system attribute makes each answer longer for both sides to encode and
		// parse. The emulator answers system attributes only to AttributeNames; real SQS to both.
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeName(types.MessageSystemAttributeNameApproximateReceiveCount),
			types.QueueAttributeName(types.MessageSystemAttributeNameAWSTraceHeader),
			types.QueueAttributeName(types.MessageSystemAttributeNameSentTimestamp),
		},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameAWSTraceHeader,
			types.MessageSystemAttributeNameSentTimestamp,
		},
		MessageAttributeNames: []string{"All"},
	}
	if r.fifo {
		in.AttributeNames = append(in.AttributeNames, types.QueueAttributeName(types.MessageSystemAttributeNameMessageGroupId))
		in.MessageSystemAttributeNames = append(in.MessageSystemAttributeNames, types.MessageSystemAttributeNameMessageGroupId)
	}
	if r.cfg.VisibilityTimeout > 0 {
		in.VisibilityTimeout = int32(r.cfg.VisibilityTimeout / time.Second)
	}
	out, err := r.c.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, err
	}
	r.m.receives.Inc()
	r.m.received.Add(float64(len(out.Messages)))
	return out.Messages, nil
}

// track registers a received message; it reports false for a message already in flight
// here (SQS redelivered it, or the emulator returned it twice), whose newer receipt
// handle then replaces the old one.
func (r *run) track(sm types.Message) (*tracked, Message, bool) {
	id := aws.ToString(sm.MessageId)
	receipt := aws.ToString(sm.ReceiptHandle)
	r.mu.Lock()
	if t, ok := r.tracked[id]; ok {
		if !t.settled {
			t.receipt = receipt
			t.extended = time.Now()
		}
		r.mu.Unlock()
		r.log.Debug("duplicate delivery of a message in flight", zap.String("message_id", id))
		return nil, Message{}, false
	}
	t := &tracked{id: id, receipt: receipt, extended: time.Now()}
	r.tracked[id] = t
	r.mu.Unlock()
	r.m.inFlight.Inc()
	rc, err := strconv.Atoi(sm.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	if err != nil || rc < 1 {
		rc = 1
	}
	if rc == 1 {
		// A redelivery's age is its visibility timeouts, not the path's.
		if ms, err := strconv.ParseInt(sm.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			r.m.receiveAge.Observe(max(time.Since(time.UnixMilli(ms)), 0).Seconds())
		}
	}
	return t, Message{
		ID:             id,
		ReceiptHandle:  receipt,
		Body:           []byte(aws.ToString(sm.Body)),
		ReceiveCount:   rc,
		Attributes:     fromSQSAttributes(sm.MessageAttributes),
		GroupID:        sm.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		AWSTraceHeader: sm.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)],
	}, true
}

// settle marks t as answered and returns its newest receipt handle, and whether it was
// handed back already.
func (r *run) settle(t *tracked) (receipt string, handedBack bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.settled = true
	return t.receipt, t.handedBack
}

func (r *run) untrack(t *tracked) {
	r.mu.Lock()
	if r.tracked[t.id] == t {
		delete(r.tracked, t.id)
	}
	r.mu.Unlock()
	r.m.inFlight.Dec()
}

// receiveLoop receives while a handler is free and starts one handler per message (on a
// FIFO queue, one per group of the receive: handleGroup); cfg.Receivers of them share the
// handler slots.
func (r *run) receiveLoop(ctx context.Context) {
	r.receiveInto(ctx, r.slots, func(n int) { giveBack(r.sem, n) }, func(ts []*tracked, ms []Message) {
		r.handlers.Add(len(ms))
		if !r.fifo {
			for i := range ms {
				go r.handleOne(ts[i], ms[i])
			}
			return
		}
		for _, g := range byGroup(ms) {
			gts, gms := make([]*tracked, len(g)), make([]Message, len(g))
			for k, i := range g {
				gts[k], gms[k] = ts[i], ms[i]
			}
			go r.handleGroup(ctx, gts, gms)
		}
	})
}

// byGroup returns the indexes of ms by group id, each group's in the order of ms, the
// groups in the order of their first message.
func byGroup(ms []Message) [][]int {
	var groups [][]int
	at := map[string]int{}
	for i, m := range ms {
		g, ok := at[m.GroupID]
		if !ok {
			g = len(groups)
			at[m.GroupID] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// receiveInto receives for as long as take grants room: take returns how many messages
// the next receive may ask for (0 once ctx ended), give gets back the room a receive did
// not use, and deliver gets the messages of each receive, in the order SQS gave them.
// With ReceiveLinger, each receive first takes a turn of the run's pacer (see pacer).
func (r *run) receiveInto(ctx context.Context, take func(context.Context) int, give func(int), deliver func([]*tracked, []Message)) {
	pauses := receiveBackoff()
	var streak pacerStreak // this loop's full receives in a row (see pacer)
	for {
		if !r.pace.begin(ctx) {
			return
		}
		n := take(ctx)
		if n == 0 {
			r.pace.leave()
			return
		}
		msgs, err := r.receive(ctx, n, r.cfg.WaitTimeSeconds)
		if err != nil {
			give(n)
			r.pace.leave()
			if ctx.Err() != nil {
				return
			}
			r.receiveFailed(ctx, err, pauses.NextBackOff())
			continue
		}
		pauses.Reset()
		var (
			ts      []*tracked
			ms      []Message
			surplus []*tracked
		)
		for _, sm := range msgs {
			t, m, ok := r.track(sm)
			if !ok {
				continue
			}
			if len(ms) == n {
				// More messages than asked for: never more than the room taken.
				surplus = append(surplus, t)
				continue
			}
			ts, ms = append(ts, t), append(ms, m)
		}
		if len(surplus) > 0 {
			r.handBackNow(surplus)
		}
		if len(ms) > 0 {
			deliver(ts, ms)
		}
		give(n - len(ms))
		streak = r.pace.end(ctx, len(msgs), n, streak)
	}
}

// pacer keeps the receives in flight between 1 and Receivers, following how full they
// come back (SQS answers a long poll as soon as any message is visible, so fixed receivers
// at a moderate rate each bring little and cost a request each):
//
//   - backlogRun full receives in a row from one receiver, none after a linger, raise the
//     limit by one (a single full one may be a producer's batch that woke every poll);
//   - a part-full one lowers it and its receiver lingers ReceiveLinger, holding its turn,
//     so that what arrives meanwhile comes in one receive; an empty one lowers it.
//
// A message waits at most ReceiveLinger longer to be received. A nil pacer (ReceiveLinger
// 0) lets every receiver go at once. docs/queue.md, "Receive linger", has the rule and its
// figures.
type pacer struct {
	linger time.Duration
	most   int

	mu       sync.Mutex
	limit    int           // receives allowed in flight, 1..most
	inFlight int           // turns taken
	wake     chan struct{} // closed and replaced when a turn ends or the limit rises
}

// newPacer returns the pacer of a run, nil when linger is 0 (no pacing).
func newPacer(linger time.Duration, receivers int) *pacer {
	if linger <= 0 {
		return nil
	}
	// It starts at one receive in flight: a backlog raises it with every full receive, so
	// Receivers are in flight after a few round trips, and a fleet started on an idle queue
	// polls it once at a time from the first.
	return &pacer{linger: linger, most: receivers, limit: 1, wake: make(chan struct{})}
}

// begin waits for a turn to receive; it reports false when ctx ended first.
func (p *pacer) begin(ctx context.Context) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	for p.inFlight >= p.limit {
		w := p.wake
		p.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return false
		}
		p.mu.Lock()
	}
	p.inFlight++
	p.mu.Unlock()
	return true
}

// backlogRun is how many full receives in a row, none after a linger, raise the limit:
// a backlog brings one after another; a flow of batches that wake the long polls of
// several consumers gives one of them three in a row only now and then.
const backlogRun = 3

// pacerStreak is what a receive loop remembers of its last receives for its pacer.
type pacerStreak struct {
	full     int  // full receives in a row, none sent after a linger
	lingered bool // whether the last receive lingered after it
}

// end ends the turn of a receive that asked for asked messages and got got: it moves the
// limit by the receive's fill and by the loop's streak before it, and for a part-full
// receive lingers first. It returns the streak the loop's next receive follows.
func (p *pacer) end(ctx context.Context, got, asked int, s pacerStreak) pacerStreak {
	if p == nil {
		return pacerStreak{}
	}
	next := pacerStreak{}
	p.mu.Lock()
	switch {
	case got >= asked && !s.lingered:
		next.full = s.full + 1
		if next.full >= backlogRun {
			p.limit = min(p.limit+1, p.most)
			next.full = 0
		}
	case got < asked:
		p.limit = max(p.limit-1, 1)
	}
	p.mu.Unlock()
	next.lingered = got > 0 && got < asked
	if next.lingered {
		t := time.NewTimer(p.linger)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	p.leave()
	return next
}

// leave ends a turn without moving the limit (a receive that failed or never went out).
func (p *pacer) leave() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.inFlight--
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// slots takes the handler slots of the next receive (see room). One receive loop at a
// time takes them, so that with ReceiveFill the slots freed meanwhile go to one receive
// instead of being split between the loops.
func (r *run) slots(ctx context.Context) int {
	r.fillMu.Lock()
	defer r.fillMu.Unlock()
	return room(ctx, r.sem, r.cfg.MaxMessages, r.cfg.ReceiveFill)
}

// room takes tokens of sem for the next receive: at least one (back-pressure: no receive
// until there is room), no more than most. With fill > 0 it waits that long for more when fewer
// are free. It returns 0 when ctx ended first.
func room(ctx context.Context, sem chan struct{}, most int, fill time.Duration) int {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
more:
	for n < most {
		select {
		case sem <- struct{}{}:
			n++
		default:
			break more
		}
	}
	if n == most || fill <= 0 {
		return n
	}
	t := time.NewTimer(fill)
	defer t.Stop()
	for n < most {
		select {
		case sem <- struct{}{}:
			n++
		case <-t.C:
			return n
		case <-ctx.Done():
			return n // the receive fails at once and gives them back
		}
	}
	return n
}

// receiveBackoff is the pause after failed receives in a row: 1 s, doubling, at most 30 s,
// without jitter (one consumer's receivers failing together do not load SQS much).
func receiveBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: 30 * time.Second}
}

func (r *run) receiveFailed(ctx context.Context, err error, wait time.Duration) {
	r.m.receiveErrors.Inc()
	r.log.Warn("receive failed", zap.Error(err), zap.Duration("retry_in", wait))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (r *run) handleOne(t *tracked, m Message) {
	growstack.Grow()
	defer r.handlers.Done()
	defer func() { <-r.sem }()
	r.handle(t, m)
}

// handle runs the handler on m and carries out its outcome, which it returns.
func (r *run) handle(t *tracked, m Message) Outcome {
	if r.cfg.SpanInHandler {
		start := time.Now()
		out := callHandler(r.hctx, r.h, m)
		r.m.handlerDuration.Observe(time.Since(start).Seconds())
		r.apply(t, m, out)
		return out
	}
	ctx, span := startProcess(r.hctx, r.cfg.Name, m, nil)
	start := time.Now()
	out := callHandler(ctx, r.h, m)
	r.m.handlerDuration.Observe(time.Since(start).Seconds())
	endProcess(span, out)
	r.apply(t, m, out)
	return out
}

// handleGroup handles the messages one receive brought of one FIFO group one after the
// other, in the order SQS gave them (the group's), so that the handler sees them in that
// order. A Retry stops it: the messages after the retried one go back to SQS unhandled
// (visibility 0), and SQS, which delivers none of a group while one of its messages is in
// flight, gives them again only after it. So does the end of receiving (ctx) or the
// shutdown's hand-back: another consumer takes them at once. A Poison goes on to the
// next message, as SQS's own redrive of a FIFO queue does. Each message holds its
// handler slot until it is handled or given back.
func (r *run) handleGroup(ctx context.Context, ts []*tracked, ms []Message) {
	growstack.Grow()
	for i := range ms {
		if i > 0 && (ctx.Err() != nil || r.handedBack(ts[i])) {
			r.giveUp(ts[i:])
			return
		}
		out := r.handle(ts[i], ms[i])
		<-r.sem
		r.handlers.Done()
		if isRetry(out) {
			r.giveUp(ts[i+1:])
			return
		}
	}
}

// handedBack reports whether t was handed back already (the shutdown's hand-back).
func (r *run) handedBack(t *tracked) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.handedBack
}

// giveUp returns messages of handleGroup that will not be handled now to SQS, and their
// handler slots.
func (r *run) giveUp(ts []*tracked) {
	if len(ts) == 0 {
		return
	}
	var back, gone []*tracked
	r.mu.Lock()
	for _, t := range ts {
		if t.handedBack {
			gone = append(gone, t)
		} else {
			back = append(back, t)
		}
	}
	r.mu.Unlock()
	for _, t := range gone {
		r.untrack(t)
	}
	if len(back) > 0 {
		r.handBackNow(back)
	}
	for range ts {
		<-r.sem
		r.handlers.Done()
	}
}

func callHandler(ctx context.Context, h Handler, m Message) (out Outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Verdict: Retry, Reason: fmt.Sprintf("handler panicked: %v", p)}
		}
	}()
	return h(ctx, m)
}

func callBatchHandler(ctx context.Context, bh BatchHandler, ms []Message) (outs []Outcome, reason string) {
	defer func() {
		if p := recover(); p != nil {
			outs, reason = nil, fmt.Sprintf("batch handler panicked: %v", p)
		}
	}()
	return bh(ctx, ms), ""
}

// apply carries out a handler's outcome for one message.
func (r *run) apply(t *tracked, m Message, out Outcome) {
	if isRetry(out) {
		r.retry([]*tracked{t}, []Message{m}, []Outcome{out})
		return
	}
	defer r.untrack(t)
	_, handedBack := r.settle(t)
	// Built only for a line: a message done and deleted logs nothing.
	log := func() *zap.Logger { return r.log.With(messageFields(m)...) }
	if handedBack && out.Verdict != Done {
		// Already back in SQS; it will be redelivered.
		return
	}
	switch out.Verdict {
	case Done:
		if err := r.delete(t); err != nil {
			log().Warn("delete failed; the message will be redelivered", zap.Error(err))
			return
		}
		r.m.deleted.Inc()
	case Poison:
		attrs := make(map[string]string, len(m.Attributes)+1)
		maps.Copy(attrs, m.Attributes)
		attrs[AttrSourceQueue] = r.cfg.Name
		ctx, cancel := context.WithTimeout(r.ioctx, r.cfg.CallTimeout)
		// A copy sent again (the delete below failed, the message came back) within five
		// minutes is dropped by a FIFO DLQ: it has the same message id.
		keys := Keys{Group: cmp.Or(m.GroupID, DeadLetterGroup), Dedup: m.ID}
		err := DeadLetter(ctx, r.c, r.cfg.DLQURL, m.Body, out.Reason, attrs, keys)
		cancel()
		if err != nil {
			// Not deleted: the message stays in SQS and comes back (nothing lost).
			log().Error("dead-letter failed; message kept for redelivery", zap.String("reason", out.Reason), zap.Error(err))
			return
		}
		r.m.deadLettered.Inc()
		log().Warn("message dead-lettered", zap.String("reason", out.Reason))
		if err := r.delete(t); err != nil {
			log().Warn("delete after dead-letter failed; the message will be redelivered", zap.Error(err))
			return
		}
		r.m.deleted.Inc()
	}
}

// messageFields are the fields of a log line about m: its id, its receive count, and the
// trace_id and span_id of the span that sent it (its traceparent, else its
// AWSTraceHeader), so that a search by trace id finds the consumer's lines about it.
func messageFields(m Message) []zap.Field {
	return append([]zap.Field{zap.String("message_id", m.ID), zap.Int("receive_count", m.ReceiveCount)},
		tracing.LogFields(tracing.Extract(context.Background(), m.Attributes, m.AWSTraceHeader))...)
}

// isRetry reports whether out makes its message visible again later: Retry, and any
// verdict this version does not know.
func isRetry(out Outcome) bool {
	return out.Verdict != Done && out.Verdict != Poison
}

// retry makes each message visible again after its own backoff. The changes go out ten
// per ChangeMessageVisibilityBatch call (each entry carries its own delay), so a batch
// handed back holds visMu for a few calls, not one per message, and the heartbeats of
// the other batches in flight are not held up behind it.
func (r *run) retry(ts []*tracked, ms []Message, outs []Outcome) {
	defer func() {
		for _, t := range ts {
			r.untrack(t)
		}
	}()
	changes := make([]visChange, 0, len(ts))
	at := make([]int, 0, len(ts)) // changes[k] is for ms[at[k]]
	for i, t := range ts {
		receipt, handedBack := r.settle(t)
		if handedBack {
			// Already back in SQS; it will be redelivered.
			continue
		}
		out := outs[i]
		var delay time.Duration
		switch {
		case out.After > 0:
			delay = min(out.After, maxVisibility)
		case r.cfg.RetryDelay != nil:
			delay = min(max(r.cfg.RetryDelay(ms[i].ReceiveCount), 0), maxVisibility)
		default:
			delay = RetryDelay(ms[i].ReceiveCount, r.cfg.RetryBase, r.cfg.RetryMax)
		}
		secs := int32((delay + time.Second - 1) / time.Second)
		r.m.retried.Inc()
		if ce := r.log.Check(zap.DebugLevel, "retry later"); ce != nil {
			ce.Write(append(messageFields(ms[i]), zap.String("reason", out.Reason), zap.Int32("delay_seconds", secs))...)
		}
		changes = append(changes, visChange{receipt: receipt, secs: secs})
		at = append(at, i)
	}
	if len(changes) == 0 {
		return
	}
	r.visMu.Lock()
	errs := r.changeVisibility(changes)
	r.visMu.Unlock()
	for k, err := range errs {
		if err != nil {
			// It comes back after its current visibility timeout instead.
			r.log.Warn("retry: change visibility failed", append(messageFields(ms[at[k]]), zap.Error(err))...)
		}
	}
}

// delete asks the delete loop to delete t in a batch and waits for the answer.
func (r *run) delete(t *tracked) error {
	req := deleteReq{t: t, res: make(chan error, 1)}
	select {
	case r.deletes <- req:
	case <-r.stopped:
		return errStopped
	}
	return <-req.res
}

// deleteLoop coalesces deletes from concurrent handlers into DeleteMessageBatch calls.
func (r *run) deleteLoop() {
	var calls sync.WaitGroup
	defer calls.Wait()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var batch []deleteReq
		select {
		case req := <-r.deletes:
			batch = append(batch, req)
		case <-r.stopped:
			return
		}
		timer.Reset(r.cfg.DeleteLinger)
	collect:
		for len(batch) < maxBatchEntries {
			select {
			case req := <-r.deletes:
				batch = append(batch, req)
			case <-timer.C:
				break collect
			case <-r.stopped:
				break collect
			}
		}
		timer.Stop()
		calls.Add(1)
		go func() {
			growstack.Grow()
			defer calls.Done()
			r.deleteBatch(batch)
		}()
	}
}

func (r *run) deleteBatch(batch []deleteReq) {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(batch))
	r.mu.Lock()
	for i, req := range batch {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(req.t.receipt)}
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ioctx, r.cfg.CallTimeout)
	defer cancel()
	out, err := r.c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.cfg.QueueURL), Entries: entries})
	if err != nil {
		for _, req := range batch {
			req.res <- err
		}
		return
	}
	answered := make([]bool, len(batch))
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(batch) && !answered[i] {
			answered[i] = true
			batch[i].res <- fmt.Errorf("queue: delete: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	for i := range batch {
		if !answered[i] {
			// Listed as successful (or not at all: SQS answers every entry).
			batch[i].res <- nil
		}
	}
}

// heartbeatLoop extends the visibility of messages still being handled, so a slow
// handler does not see its message delivered to another consumer meanwhile.
func (r *run) heartbeatLoop(stop <-chan struct{}) {
	tick := time.NewTicker(r.hbEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-r.stopped:
			return
		case <-tick.C:
			r.heartbeat()
		}
	}
}

func (r *run) heartbeat() {
	r.visMu.Lock()
	defer r.visMu.Unlock()
	now := time.Now()
	secs := int32(r.vis / time.Second)
	var due []*tracked
	var changes []visChange
	r.mu.Lock()
	for _, t := range r.tracked {
		// Half an interval of slack, so tick jitter never skips a beat.
		if !t.settled && now.Sub(t.extended) >= r.hbEvery/2 {
			due = append(due, t)
			changes = append(changes, visChange{receipt: t.receipt, secs: secs})
		}
	}
	r.mu.Unlock()
	if len(due) == 0 {
		return
	}
	failed := r.changeVisibility(changes)
	r.mu.Lock()
	for i, t := range due {
		if failed[i] == nil {
			t.extended = now
		}
	}
	r.mu.Unlock()
	for i, err := range failed {
		if err != nil {
			r.log.Debug("heartbeat failed", zap.String("message_id", due[i].id), zap.Error(err))
		}
	}
}

// visChange is one message's new visibility timeout.
type visChange struct {
	receipt string
	secs    int32
}

// changeVisibility carries out changes ten per call (SQS's most per batch); it returns
// one error (or nil) per change: the call's error, or its entry's failure (a stale
// receipt handle, say) while the call's other entries succeed.
func (r *run) changeVisibility(changes []visChange) []error {
	errs := make([]error, len(changes))
	// The calls of a large set (a shutdown's hand-back of every message in flight) go out
	// a few at a time, so that they finish within the shutdown's reserve on a slow SQS.
	var wg sync.WaitGroup
	sem := make(chan struct{}, visCallsInFlight)
	for lo := 0; lo < len(changes); lo += maxBatchEntries {
		hi := min(lo+maxBatchEntries, len(changes))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.changeVisibilityBatch(changes, errs, lo, hi)
		})
	}
	wg.Wait()
	return errs
}

// visCallsInFlight bounds the ChangeMessageVisibilityBatch calls of one changeVisibility.
const visCallsInFlight = 8

// changeVisibilityBatch sends changes[lo:hi] in one call and records each one's error in
// errs[lo:hi].
func (r *run) changeVisibilityBatch(changes []visChange, errs []error, lo, hi int) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, 0, hi-lo)
	for i := lo; i < hi; i++ {
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(changes[i].receipt), VisibilityTimeout: changes[i].secs,
		})
	}
	ctx, cancel := context.WithTimeout(r.ioctx, r.cfg.CallTimeout)
	out, err := r.c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(r.cfg.QueueURL), Entries: entries})
	cancel()
	if err != nil {
		for i := lo; i < hi; i++ {
			errs[i] = err
		}
		return
	}
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= lo && i < hi {
			errs[i] = fmt.Errorf("queue: change visibility: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
}

// handBack makes every unsettled message visible again at once and returns how many.
func (r *run) handBack() int {
	r.visMu.Lock()
	defer r.visMu.Unlock()
	var ts []*tracked
	var changes []visChange
	r.mu.Lock()
	for _, t := range r.tracked {
		if !t.settled {
			t.settled, t.handedBack = true, true
			ts = append(ts, t)
			changes = append(changes, visChange{receipt: t.receipt})
		}
	}
	r.mu.Unlock()
	for i, err := range r.changeVisibility(changes) {
		if err != nil {
			r.log.Warn("hand back failed; the message comes back after its visibility timeout", zap.String("message_id", ts[i].id), zap.Error(err))
		}
	}
	return len(ts)
}

// handBackNow returns messages that no handler can take now, ten per call.
func (r *run) handBackNow(ts []*tracked) {
	changes := make([]visChange, len(ts))
	r.mu.Lock()
	for i, t := range ts {
		t.settled, t.handedBack = true, true
		changes[i] = visChange{receipt: t.receipt}
	}
	r.mu.Unlock()
	r.visMu.Lock()
	r.changeVisibility(changes)
	r.visMu.Unlock()
	for _, t := range ts {
		r.untrack(t)
	}
}
