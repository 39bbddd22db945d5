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
