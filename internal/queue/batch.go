package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/growstack"
	"github.com/junban/junban/internal/platform/tracing"
)

func (r *run) handleBatch(ts []*tracked, ms []Message) {
	growstack.Grow()
	defer r.handlers.Done()
	defer func() { <-r.sem }()
	ctx, span := startProcessBatch(r.hctx, r.cfg.Name, ms)
	start := time.Now()
	outs, reason := callBatchHandler(ctx, r.bh, ms)
	r.m.handlerDuration.Observe(time.Since(start).Seconds())
	if reason != "" && span.IsRecording() {
		span.SetStatus(codes.Error, reason)
	}
	span.End()
	if len(outs) != len(ms) {
		// Which outcome belongs to which message is unknown: retry them all (handlers
		// are idempotent, so the ones already done are only repeated).
		if reason == "" {
			reason = fmt.Sprintf("batch handler returned %d outcomes for %d messages", len(outs), len(ms))
		}
		r.log.Error("batch handler failed; retrying the batch", append(tracing.LogFields(ctx), zap.String("reason", reason), zap.Int("messages", len(ms)))...)
		outs = make([]Outcome, len(ms))
		for i := range outs {
			outs[i] = Outcome{Verdict: Retry, Reason: reason}
		}
	}
	// The batch's Retries go back together, in a few ChangeMessageVisibilityBatch calls
	// (see retry); the other outcomes each on their own.
	var (
		wg    sync.WaitGroup
		rts   []*tracked
		rms   []Message
		routs []Outcome
	)
	for i := range ms {
		if isRetry(outs[i]) {
			rts, rms, routs = append(rts, ts[i]), append(rms, ms[i]), append(routs, outs[i])
			continue
		}
		wg.Go(func() { r.apply(ts[i], ms[i], outs[i]) })
	}
	if len(rts) > 0 {
		wg.Go(func() { r.retry(rts, rms, routs) })
	}
	wg.Wait()
}

// received is one receive's messages on their way into a shared batch; full says the
// receive brought MaxMessages (a backlog may be behind it).
type received struct {
	items []batchItem
	full  bool
}

// batchItem is a received message on its way into a shared batch.
type batchItem struct {
	t  *tracked
	m  Message
	at time.Time // its receive
}

// receiveBatches: cfg.Receivers receive loops feed one batch at a time, which goes to a
// BatchHandler when it holds BatchMax messages or BatchWindow after its first, and at
// once when a part-full receive (no backlog behind it) finds no BatchHandler call in
// flight, or when the calls in flight all returned: a lone receive waits for nothing,
// and under load a batch fills while the ones before it are handled. Several
// receives in flight keep up with a backlog, and the batches stay as large as the flow
// allows: with one collecting loop per receiver instead, each batch would get only its
// share of the flow (many small transactions downstream).
//
// Back-pressure: a loop receives only messages it has credit for; a message's credit comes
// back when its batch was handled. Credits are (Concurrency+1) x BatchMax, so the batch being
// collected can fill while Concurrency others are handled.
func (r *run) receiveBatches(ctx context.Context) {
	credits := make(chan struct{}, (r.cfg.Concurrency+1)*r.cfg.BatchMax)
	in := make(chan received, r.cfg.Receivers)
	var loops sync.WaitGroup
	for range r.cfg.Receivers {
		loops.Go(func() { r.feedBatches(ctx, credits, in) })
	}
	go func() { loops.Wait(); close(in) }()
	r.cutBatches(ctx, in, credits)
}

// feedBatches receives for the shared batch while it has credit.
func (r *run) feedBatches(ctx context.Context, credits chan struct{}, in chan<- received) {
	r.receiveInto(ctx,
		func(ctx context.Context) int { return room(ctx, credits, r.cfg.MaxMessages, 0) },
		func(n int) { giveBack(credits, n) },
		func(ts []*tracked, ms []Message) {
			now := time.Now()
			items := make([]batchItem, len(ms))
			for i := range ms {
				items[i] = batchItem{ts[i], ms[i], now}
			}
			in <- received{items, len(ms) >= r.cfg.MaxMessages}
		})
}

// cutBatches collects what the receive loops bring into batches (each receive's messages
// together) and starts one BatchHandler call per batch, at most Concurrency at once (see
// receiveBatches for when a batch goes). It returns when every loop stopped (ctx ended)
// and the last batch was started or, with no handler free by then, handed back to SQS.
func (r *run) cutBatches(ctx context.Context, in <-chan received, credits chan struct{}) {
	var (
		ts     []*tracked
		ms     []Message
		ats    []time.Time // each message's receive
		timer  *time.Timer
		window <-chan time.Time
		// calls counts the BatchHandler calls in flight; idle wakes the loop when it
		// drops to zero.
		calls atomic.Int32
		idle  = make(chan struct{}, 1)
	)
	cut := func() {
		if timer != nil {
			timer.Stop()
			timer, window = nil, nil
		}
		if len(ms) == 0 {
			return
		}
		bt, bm, bat := ts, ms, ats
		ts, ms, ats = nil, nil, nil
		select {
		case r.sem <- struct{}{}:
		default:
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				// Shutting down with every handler busy: the batch goes back to SQS now
				// rather than waiting in memory while the visibility runs.
				r.handBackNow(bt)
				giveBack(credits, len(bt))
				return
			}
		}
		now := time.Now()
		for _, at := range bat {
			r.m.batchWait.Observe(now.Sub(at).Seconds())
		}
		r.handlers.Add(1)
		calls.Add(1)
		go func() {
			r.handleBatch(bt, bm)
			giveBack(credits, len(bt))
			if calls.Add(-1) == 0 {
				select {
				case idle <- struct{}{}:
				default: // a wake-up is pending already
				}
			}
		}()
	}
	for {
		select {
		case rec, ok := <-in:
			if !ok {
				cut()
				return
			}
			for _, it := range rec.items {
				ts, ms, ats = append(ts, it.t), append(ms, it.m), append(ats, it.at)
				if len(ms) == 1 {
					timer = time.NewTimer(r.cfg.BatchWindow)
					window = timer.C
				}
				if len(ms) >= r.cfg.BatchMax {
					cut()
				}
			}
			if !rec.full && calls.Load() == 0 {
				cut()
			}
		case <-idle:
			if calls.Load() == 0 {
				cut()
			}
		case <-window:
			timer, window = nil, nil
			cut()
		}
	}
}

// giveBack returns n tokens taken from sem (handler slots or credits).
func giveBack(sem chan struct{}, n int) {
	for range n {
		<-sem
	}
}
