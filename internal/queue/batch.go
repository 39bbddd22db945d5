package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// batchIdlePoll is the pause between short polls while a batch is still collecting and
// the queue had nothing more.
const batchIdlePoll = 50 * time.Millisecond

// receiveBatches collects batches while a batch handler is free and starts one
// BatchHandler call per batch.
func (r *run) receiveBatches(ctx context.Context) {
	var fails int
	for {
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ts, ms, err := r.collect(ctx)
		if len(ms) == 0 {
			<-r.sem
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				fails++
				r.receiveFailed(ctx, err, fails)
			}
			continue
		}
		fails = 0
		r.handlers.Add(1)
		go r.handleBatch(ts, ms)
	}
}

// collect long-polls for a first message, then keeps receiving (short polls) until the
// batch holds cfg.BatchMax messages or cfg.BatchWindow passed since the first one.
func (r *run) collect(ctx context.Context) ([]*tracked, []Message, error) {
	var ts []*tracked
	var ms []Message
	var deadline time.Time
	for len(ms) < r.cfg.BatchMax {
		wait := r.cfg.WaitTimeSeconds
		if len(ms) > 0 {
			if time.Until(deadline) <= 0 {
				break
			}
			wait = 0
		}
		msgs, err := r.receive(ctx, min(r.cfg.MaxMessages, r.cfg.BatchMax-len(ms)), wait)
		if err != nil {
			if len(ms) > 0 {
				break // hand over what we hold; the next receive meets the error again
			}
			return nil, nil, err
		}
		for _, sm := range msgs {
			t, m, ok := r.track(sm)
			if !ok {
				continue
			}
			ts, ms = append(ts, t), append(ms, m)
		}
		if len(ms) == 0 {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(r.cfg.BatchWindow)
		}
		if len(msgs) == 0 {
			pause := time.NewTimer(min(time.Until(deadline), batchIdlePoll))
			select {
			case <-pause.C:
			case <-ctx.Done():
			}
			pause.Stop()
		}
		if ctx.Err() != nil {
			break
		}
	}
	return ts, ms, nil
}

func (r *run) handleBatch(ts []*tracked, ms []Message) {
	defer r.handlers.Done()
	defer func() { <-r.sem }()
	start := time.Now()
	outs, reason := callBatchHandler(r.hctx, r.bh, ms)
	r.m.handlerDuration.Observe(time.Since(start).Seconds())
	if len(outs) != len(ms) {
		// Which outcome belongs to which message is unknown: retry them all (handlers
		// are idempotent, so the ones already done are only repeated).
		if reason == "" {
			reason = fmt.Sprintf("batch handler returned %d outcomes for %d messages", len(outs), len(ms))
		}
		r.log.Error("batch handler failed; retrying the batch", zap.String("reason", reason), zap.Int("messages", len(ms)))
		outs = make([]Outcome, len(ms))
		for i := range outs {
			outs[i] = Outcome{Verdict: Retry, Reason: reason}
		}
	}
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { r.apply(ts[i], ms[i], outs[i]) })
	}
	wg.Wait()
}

// batchItem is a received message on its way into a shared batch.
type batchItem struct {
	t *tracked
	m Message
}

// receiveSharedBatches (a batch consumer with Receivers > 1): cfg.Receivers receive loops
// feed one batch at a time, which goes to a BatchHandler when it holds BatchMax messages or
// BatchWindow after its first. Several receives in flight keep up with a backlog, and the
// batches stay as large as the flow allows: with one collecting loop per receiver instead,
// each batch gets only its share of the flow (many small transactions downstream).
//
// Back-pressure: a loop receives only messages it has credit for; a message's credit comes
// back when its batch was handled. Credits are (Concurrency+1) x BatchMax, so the batch being
// collected can fill while Concurrency others are handled.
func (r *run) receiveSharedBatches(ctx context.Context) {
	credits := make(chan struct{}, (r.cfg.Concurrency+1)*r.cfg.BatchMax)
	in := make(chan batchItem, r.cfg.Receivers*r.cfg.MaxMessages)
	var loops sync.WaitGroup
	for range r.cfg.Receivers {
		loops.Go(func() { r.feedBatches(ctx, credits, in) })
	}
	go func() { loops.Wait(); close(in) }()
	r.cutBatches(ctx, in, credits)
}

// feedBatches receives for the shared batch while it has credit.
func (r *run) feedBatches(ctx context.Context, credits chan struct{}, in chan<- batchItem) {
	r.receiveInto(ctx,
		func(ctx context.Context) int { return room(ctx, credits, r.cfg.MaxMessages, 0) },
		func(n int) { releaseCredits(credits, n) },
		func(t *tracked, m Message) { in <- batchItem{t, m} })
}

// cutBatches collects what the receive loops bring into batches and starts one
// BatchHandler call per batch, at most Concurrency at once. It returns when every loop
// stopped (ctx ended) and the last batch was started or, with no handler free by then,
// handed back to SQS.
func (r *run) cutBatches(ctx context.Context, in <-chan batchItem, credits chan struct{}) {
	var (
		ts     []*tracked
		ms     []Message
		timer  *time.Timer
		window <-chan time.Time
	)
	cut := func() {
		if timer != nil {
			timer.Stop()
			timer, window = nil, nil
		}
		if len(ms) == 0 {
			return
		}
		bt, bm := ts, ms
		ts, ms = nil, nil
		select {
		case r.sem <- struct{}{}:
		default:
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				// Shutting down with every handler busy: the batch goes back to SQS now
				// rather than waiting in memory while the visibility runs.
				for _, t := range bt {
					r.handBackOne(t)
				}
				releaseCredits(credits, len(bt))
				return
			}
		}
		r.handlers.Add(1)
		go func() {
			r.handleBatch(bt, bm)
			releaseCredits(credits, len(bt))
		}()
	}
	for {
		select {
		case it, ok := <-in:
			if !ok {
				cut()
				return
			}
			ts, ms = append(ts, it.t), append(ms, it.m)
			if len(ms) == 1 {
				timer = time.NewTimer(r.cfg.BatchWindow)
				window = timer.C
			}
			if len(ms) >= r.cfg.BatchMax {
				cut()
			}
		case <-window:
			timer, window = nil, nil
			cut()
		}
	}
}

func releaseCredits(credits chan struct{}, n int) {
	for range n {
		<-credits
	}
}
