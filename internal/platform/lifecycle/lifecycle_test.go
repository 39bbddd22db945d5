package lifecycle_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/lifecycle"
)

// recorder records the order of the parts' starts and stops.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// part records its Start and Stop; startErr fails its Start; block makes its Stop wait for
// its context.
type part struct {
	name     string
	rec      *recorder
	startErr error
	block    bool
}

func (p *part) Start(context.Context) error {
	p.rec.add("start " + p.name)
	return p.startErr
}

func (p *part) Stop(ctx context.Context) error {
	p.rec.add("stop " + p.name)
	if p.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// The runner starts the parts in the order they were added and stops them in the reverse
// order once its context ends. (Fails with stop walking the parts forwards; tried.)
func TestRunnerStopsInReverseOrder(t *testing.T) {
	rec := &recorder{}
	var r lifecycle.Runner
	for _, n := range []string{"a", "b", "c"} {
		r.Add(lifecycle.Part{Name: n, Service: &part{name: n, rec: rec}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := r.Run(ctx, func() { rec.add("started"); cancel() })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start b", "start c", "started", "stop c", "stop b", "stop a"}
	if got := rec.events(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A part that fails to start stops the ones started before it, in reverse order, and
// nothing after it starts.
func TestRunnerStartFailureStopsTheStarted(t *testing.T) {
	rec := &recorder{}
	var r lifecycle.Runner
	r.Add(lifecycle.Part{Name: "a", Service: &part{name: "a", rec: rec}})
	r.Add(lifecycle.Part{Name: "b", Service: &part{name: "b", rec: rec}})
	r.Add(lifecycle.Part{Name: "c", Service: &part{name: "c", rec: rec, startErr: errors.New("port busy")}})
	r.Add(lifecycle.Part{Name: "d", Service: &part{name: "d", rec: rec}})
	err := r.Run(context.Background(), func() { t.Error("started called after a failed start") })
	if err == nil || !strings.Contains(err.Error(), "start c: port busy") {
		t.Fatalf("err = %v, want start c's failure", err)
	}
	want := []string{"start a", "start b", "start c", "stop b", "stop a"}
	if got := rec.events(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A part's StopBound ends its Stop: the runner goes on to the next part and returns the
// cut-short Stop's error, unless the part only logs it. (Fails with stopWithin ignoring
// StopBound: the test hangs until its timeout; tried.)
func TestRunnerBoundsEachStop(t *testing.T) {
	for _, logOnly := range []bool{false, true} {
		rec := &recorder{}
		var r lifecycle.Runner
		r.Add(lifecycle.Part{Name: "a", Service: &part{name: "a", rec: rec}})
		r.Add(lifecycle.Part{Name: "slow", Service: &part{name: "slow", rec: rec, block: true}, StopBound: 50 * time.Millisecond, LogStopError: logOnly})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := r.Run(ctx, nil)
		if logOnly && err != nil {
			t.Fatalf("LogStopError: err = %v, want nil", err)
		}
		if !logOnly && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the bound's DeadlineExceeded", err)
		}
		if got, want := rec.events(), []string{"start a", "start slow", "stop slow", "stop a"}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// The Budget bounds the whole shutdown: a part whose Stop waits for its context gets what
// the budget leaves. (Fails with the budget not applied: the test hangs; tried.)
func TestRunnerBudgetBoundsTheShutdown(t *testing.T) {
	rec := &recorder{}
	r := lifecycle.Runner{Budget: 50 * time.Millisecond}
	r.Add(lifecycle.Part{Name: "slow", Service: &part{name: "slow", rec: rec, block: true}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Run(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the budget's DeadlineExceeded", err)
	}
}

// A loop that ends by itself with an error stops the binary: the runner stops the other
// parts and returns the loop's error, while its own context is still live. (Fails without
// the watch of Exited: Run waits for ctx for ever; tried.)
func TestRunnerStopsWhenALoopFails(t *testing.T) {
	rec := &recorder{}
	var r lifecycle.Runner
	r.Add(lifecycle.Part{Name: "a", Service: &part{name: "a", rec: rec}})
	failed := errors.New("receive: access denied")
	r.Add(lifecycle.Part{Name: "consumer", Service: lifecycle.NewLoop(func(context.Context) error { return failed })})
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), nil) }()
	select {
	case err := <-done:
		if !errors.Is(err, failed) {
			t.Fatalf("err = %v, want the loop's", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the loop failed")
	}
	if got := rec.events(); !slices.Equal(got, []string{"start a", "stop a"}) {
		t.Fatalf("got %v", got)
	}
}

// A loop that returns context.Canceled after its context ended ended because it was told
// to: no error.
func TestLoopCanceledIsNoError(t *testing.T) {
	var r lifecycle.Runner
	r.Add(lifecycle.Part{Name: "loop", Service: lifecycle.NewLoop(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Run(ctx, cancel); err != nil {
		t.Fatal(err)
	}
}

// The HTTP servers of Together stop at once: a request in flight on one does not hold up
// the other's shutdown, and both drain within the bound.
func TestTogetherStopsHTTPServersAtOnce(t *testing.T) {
	inFlight := make(chan struct{})
	release := make(chan struct{})
	slow := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(inFlight)
		<-release
	}), ReadHeaderTimeout: time.Second}
	idle := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	lnSlow, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lnIdle, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	both := lifecycle.Together(lifecycle.NewHTTPServer(slow, lnSlow), lifecycle.NewHTTPServer(idle, lnIdle))
	if err := both.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.Get("http://" + lnSlow.Addr().String())
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-inFlight
	stopped := make(chan error, 1)
	go func() { stopped <- both.Stop(context.Background()) }()
	// The idle server closes its listener while the slow one still drains.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", lnIdle.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the idle server still accepts while the other drains")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
