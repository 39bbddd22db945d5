package lockhandoff

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// BeforeNext queues fn to add commands to the round trip of the turn's next step (the
// handoff to the next envelope, or the release of the turn), ahead of it. It saves a
// handler's last write its own round trip: the commands run after the handler returned,
// and before the next envelope's handler starts. They are queued only for a handler that
// returns nil (a failed handler's are dropped), and they run at most once: if that round
// trip fails, they are not retried. A command that must not run once the turn moved to
// another holder fences itself (e.g. a script that checks the lock's token); since it runs
// before the step, a fenced command means the step finds the turn lost too.
//
// BeforeNext reports false when ctx is not a handler's context of this package: then
// nothing was queued and the caller runs its commands itself.
func BeforeNext(ctx context.Context, fn func(ctx context.Context, p redis.Pipeliner)) bool {
	d, ok := ctx.Value(beforeNextKey{}).(*beforeNext)
	if !ok {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.fns = append(d.fns, fn)
	return true
}

type beforeNextKey struct{}

type beforeNext struct {
	mu     sync.Mutex
	closed bool
	fns    []func(ctx context.Context, p redis.Pipeliner)
}

// take closes d to later calls and returns what was queued.
func (d *beforeNext) take() []func(ctx context.Context, p redis.Pipeliner) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	fns := d.fns
	d.fns = nil
	return fns
}

// runBefore runs queued commands in a round trip of their own (when the turn's next step
// is not a handoff); errors are the commands' own business.
func (h *Handoff) runBefore(ctx context.Context, fns []func(ctx context.Context, p redis.Pipeliner)) {
	if len(fns) == 0 {
		return
	}
	pipe := h.rc.Pipeline()
	for _, fn := range fns {
		fn(ctx, pipe)
	}
	pipe.Exec(ctx)
}
