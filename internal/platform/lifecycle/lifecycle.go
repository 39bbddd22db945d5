// Package lifecycle gives every long-running part of a binary (a server, a consumer, the
// turns, a relay, a scanner) the same two calls, Start and Stop, and runs a binary's parts
// with one Runner: started in the order they were added, stopped in the reverse order,
// each Stop within its bound.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Service is a long-running part of a binary.
type Service interface {
	// Start starts the work in the background and returns; the work also ends when ctx
	// ends.
	Start(ctx context.Context) error
	// Stop ends the work and waits for it, at most until ctx ends; an error says it was
	// cut short or failed.
	Stop(ctx context.Context) error
}

// exiter is a Service that can end by itself (a consumer whose receives failed for good,
// a server whose listener broke): Exited is closed when it has, and Err says why (nil
// when it ended because it was told to).
type exiter interface {
	Exited() <-chan struct{}
	Err() error
}

// Loop is a Service made of a foreground loop, run(ctx) that returns when ctx ends
// (queue.Consumer.Run, outbound.Relay.Run): Start runs it in a goroutine, Stop ends its
// context and waits for it to return.
type Loop struct {
	run    func(ctx context.Context) error
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// NewLoop is the Service of run.
func NewLoop(run func(ctx context.Context) error) *Loop {
	return &Loop{run: run, done: make(chan struct{})}
}

// Start runs the loop in the background until ctx ends or Stop.
func (l *Loop) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		if err := l.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			l.err = err
		}
	}()
	return nil
}

// Stop ends the loop's context and waits for it to return, at most until ctx ends.
func (l *Loop) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil // never started
	}
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("still running: %w", context.Cause(ctx))
	}
}

// Exited is closed once the loop has returned.
func (l *Loop) Exited() <-chan struct{} { return l.done }

// Err is what the loop returned, once it has, apart from context.Canceled.
func (l *Loop) Err() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// HTTPServer is the Service of an http.Server on a listener bound already (so that the
// binary reports a busy address before it starts anything): Start serves, Stop shuts the
// server down gracefully.
type HTTPServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error
}

// NewHTTPServer is the Service of srv serving ln.
func NewHTTPServer(srv *http.Server, ln net.Listener) *HTTPServer {
	return &HTTPServer{srv: srv, ln: ln, done: make(chan struct{})}
}

// Start serves in the background.
func (s *HTTPServer) Start(context.Context) error {
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = fmt.Errorf("http server: %w", err)
		}
	}()
	return nil
}

// Stop shuts the server down: it waits for the requests in flight, at most until ctx ends.
func (s *HTTPServer) Stop(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Exited is closed once Serve has returned.
func (s *HTTPServer) Exited() <-chan struct{} { return s.done }

// Err is why Serve returned, apart from a shutdown.
func (s *HTTPServer) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Together is one Service of several started in order and stopped at once, within the
// same bound (the two listeners of a server that drain together).
func Together(svcs ...Service) Service { return together(svcs) }

type together []Service

func (t together) Start(ctx context.Context) error {
	for i, s := range t {
		if err := s.Start(ctx); err != nil {
			_ = t[:i].Stop(ctx)
			return err
		}
	}
	return nil
}

func (t together) Stop(ctx context.Context) error {
	errs := make([]error, len(t))
	var wg sync.WaitGroup
	for i, s := range t {
		wg.Go(func() { errs[i] = s.Stop(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (t together) Exited() <-chan struct{} {
	out := make(chan struct{})
	var once sync.Once
	for _, s := range t {
		if e, ok := s.(exiter); ok {
			go func() {
				<-e.Exited()
				once.Do(func() { close(out) })
			}()
		}
	}
	return out
}

func (t together) Err() error {
	var errs []error
	for _, s := range t {
		if e, ok := s.(exiter); ok {
			errs = append(errs, e.Err())
		}
	}
	return errors.Join(errs...)
}

// Part is a Service as a Runner runs it.
type Part struct {
	// Name names the part in the runner's logs and errors.
	Name string
	// Service is the part.
	Service Service
	// StopBound bounds the part's Stop; 0 leaves it to the Runner's Budget, or, without
	// one, to the part (queue.Consumer bounds its own shutdown).
	StopBound time.Duration
	// LogStopError logs an error of Stop (a bound that cut the work short) instead of
	// returning it: for work a later run redoes, such as results a publisher did not send
	// before its bound.
	LogStopError bool
}

// Runner starts a binary's parts in the order they were added, and stops them in the
// reverse order once its context ends or a part ends by itself.
type Runner struct {
	// Logger logs what Run stops and why; nil logs nothing.
	Logger *zap.Logger
	// Budget bounds the whole shutdown, from the moment it begins; 0: only each part's
	// StopBound.
	Budget time.Duration
	parts  []Part
}

// Add appends a part: it starts after the parts added before it and stops before them.
func (r *Runner) Add(p Part) { r.parts = append(r.parts, p) }

// Run starts every part, calls started (when not nil), waits until ctx ends or a part
// ends by itself, then stops the parts in reverse order. It returns a part's failure to
// start (after stopping those started before it), the errors of the parts that ended by
// themselves or failed while running, and their Stop errors (except LogStopError ones).
func (r *Runner) Run(ctx context.Context, started func()) error {
	log := r.Logger
	if log == nil {
		log = zap.NewNop()
	}
	for i, p := range r.parts {
		if err := p.Service.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("start %s: %w", p.Name, err), r.stop(log, r.parts[:i]))
		}
	}
	if started != nil {
		started()
	}
	exited := make(chan string, len(r.parts))
	for _, p := range r.parts {
		if e, ok := p.Service.(exiter); ok {
			go func() {
				select {
				case <-e.Exited():
					exited <- p.Name
				case <-ctx.Done():
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", zap.Duration("budget", r.Budget))
	case name := <-exited:
		log.Warn("a part ended by itself: stopping the others", zap.String("part", name))
	}
	return r.stop(log, r.parts)
}

// stop stops parts in reverse order, each within its bound and the budget.
func (r *Runner) stop(log *zap.Logger, parts []Part) error {
	var deadline time.Time
	if r.Budget > 0 {
		deadline = time.Now().Add(r.Budget)
	}
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		err := stopWithin(p, deadline)
		switch {
		case err == nil:
		case p.LogStopError:
			log.Warn("stopped before its work was done", zap.String("part", p.Name), zap.Error(err))
		default:
			errs = append(errs, fmt.Errorf("stop %s: %w", p.Name, err))
		}
		if e, ok := p.Service.(exiter); ok {
			if err := e.Err(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// stopWithin stops p within its StopBound and before deadline (when not zero).
func stopWithin(p Part, deadline time.Time) error {
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if p.StopBound > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.StopBound)
		defer cancel()
	}
	return p.Service.Stop(ctx)
}

// Stopper is the Service of a part that works from the moment it is made (a
// queue.Publisher): Start does nothing, Stop is stop.
func Stopper(stop func(ctx context.Context) error) Service { return stopper(stop) }

type stopper func(ctx context.Context) error

func (stopper) Start(context.Context) error      { return nil }
func (s stopper) Stop(ctx context.Context) error { return s(ctx) }
