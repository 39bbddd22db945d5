package health

import (
	"context"
	"sync"
	"time"
)

// Cached returns a check that runs c at most once per ttl, however many callers ask: the
// callers that arrive while c runs wait for that run and share its result, and a result
// answers every caller for ttl after its run ended. A flood of /readyz then costs its
// dependencies one call per ttl, not one per request. A run is bounded by CheckTimeout and
// is not cut short when the caller that started it goes away; a caller whose ctx ends
// first gets ctx's error.
func Cached(c Check, ttl time.Duration) Check {
	cc := &cachedCheck{check: c, ttl: ttl}
	return cc.run
}

type cachedCheck struct {
	check Check
	ttl   time.Duration

	mu      sync.Mutex
	have    bool      // a run has ended
	ended   time.Time // when the last run ended
	err     error     // the last run's result
	running chan struct{}
}

func (c *cachedCheck) run(ctx context.Context) error {
	c.mu.Lock()
	if c.have && time.Since(c.ended) < c.ttl {
		err := c.err
		c.mu.Unlock()
		return err
	}
	done := c.running
	if done == nil {
		done = make(chan struct{})
		c.running = done
		go c.refresh(context.WithoutCancel(ctx), done)
	}
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refresh runs the check once and closes done when its result is stored.
func (c *cachedCheck) refresh(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	err := c.check(ctx)
	cancel()
	c.mu.Lock()
	c.have, c.ended, c.err, c.running = true, time.Now(), err, nil
	c.mu.Unlock()
	close(done)
}
