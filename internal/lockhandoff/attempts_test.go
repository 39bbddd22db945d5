package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// quarantineLog records what Handler.Quarantine was given.
type quarantineLog struct {
	mu    sync.Mutex
	calls []quarantined
}

type quarantined struct {
	envelope string
	f        Failure
}

func (q *quarantineLog) hook(ctx context.Context, t Turn, envelope []byte, f Failure) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, quarantined{string(envelope), f})
	return nil
}

func (q *quarantineLog) all() []quarantined {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]quarantined(nil), q.calls...)
}

// A handler that fails on every run is quarantined after exactly MaxAttempts calls,
// counted across turns (the first Submit, then the sweeper's re-runs), and the entity's
// next envelope runs after it. Broken variant tried: without the count (recordFailure
// skipped), the sweeper re-ran "poison" until the test's bound and "next" never ran.
func TestFailingEnvelopeQuarantinedAfterMaxAttempts(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	const maxAttempts = 5
	var mu sync.Mutex
	calls := map[string]int{}
	var order []string
	handler := func(ctx context.Context, tn Turn, env []byte) error {
		mu.Lock()
		defer mu.Unlock()
		calls[string(env)]++
		if string(env) == "poison" {
			return errors.New("boom " + strings.Repeat("x", 2000))
		}
		order = append(order, string(env))
		return nil
	}
	q := &quarantineLog{}
	hd, reg := newTestHandoff(t, rc, prefix, Config{MaxAttempts: maxAttempts, HandlerRetries: 1, QuarantineMinAge: -1, Handler: quarantining(handler, q.hook)}, nil)

	if _, err := hd.Submit(ctx, "E1", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	// The turn was left with "poison" in proc after two calls; "next" queues behind it,
	// and its Submit takes the free turn, which starts from proc: two more calls.
	if _, err := hd.Submit(ctx, "E1", []byte("next")); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	info, err := Inspect(ctx, rc, prefix, "E1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Proc == nil || string(info.Proc.Envelope) != "poison" || info.Proc.Failure.Attempts != 4 || info.WaitDepth != 1 {
		t.Fatalf("inspect after the first turn: %+v proc %+v", info, info.Proc)
	}
	if len(info.Proc.Failure.LastError) != maxErrorText || !strings.HasPrefix(info.Proc.Failure.LastError, "boom") {
		t.Fatalf("last error kept: %d bytes %.20q", len(info.Proc.Failure.LastError), info.Proc.Failure.LastError)
	}
	for i := 0; i < 20 && len(q.all()) == 0; i++ {
		if _, err := hd.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		<-hd.Idle()
	}
	got := q.all()
	if len(got) != 1 || got[0].envelope != "poison" || got[0].f.Attempts != maxAttempts || got[0].f.Skipped {
		t.Fatalf("quarantined: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["poison"] != maxAttempts {
		t.Errorf("poison ran %d times, want %d", calls["poison"], maxAttempts)
	}
	if len(order) != 1 || order[0] != "next" {
		t.Errorf("handled after the quarantine: %v", order)
	}
	if n := counter(t, reg, "quarantined_total"); n != 1 {
		t.Errorf("quarantined_total %v", n)
	}
	info, err = Inspect(ctx, rc, prefix, "E1")
	if err != nil || info.Proc != nil || info.WaitDepth != 0 || info.Holder != "" {
		t.Fatalf("entity after the drain: %+v %v", info, err)
	}
}

// A quarantine that fails counts as a failed run: the envelope stays in proc, and the
// next re-run quarantines it (due at once, without running the handler again).
func TestFailedQuarantineLeavesTheEnvelopeInProc(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	var mu sync.Mutex
	runs := 0
	handler := func(ctx context.Context, tn Turn, env []byte) error {
		mu.Lock()
		runs++
		mu.Unlock()
		return errors.New("boom")
	}
	fail := true
	q := &quarantineLog{}
	hook := func(ctx context.Context, tn Turn, env []byte, f Failure) error {
		if fail {
			return errors.New("dlq unreachable")
		}
		return q.hook(ctx, tn, env, f)
	}
	hd, _ := newTestHandoff(t, rc, prefix, Config{MaxAttempts: 2, HandlerRetries: 1, QuarantineMinAge: -1, Handler: quarantining(handler, hook)}, nil)
	if _, err := hd.Submit(ctx, "E1", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	info, _ := Inspect(ctx, rc, prefix, "E1")
	if info.Proc == nil || info.Proc.Failure.Attempts != 2 {
		t.Fatalf("after a failed quarantine: %+v", info.Proc)
	}
	fail = false
	if err := hd.Resume(ctx, "E1"); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	if got := q.all(); len(got) != 1 || got[0].f.Attempts != 2 {
		t.Fatalf("quarantined: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 2 {
		t.Errorf("handler ran %d times, want 2 (the re-run is quarantined without a run)", runs)
	}
}

// Skip marks the envelope in proc; the next run quarantines it with Skipped set, without
// calling the handler, however few its failures.
func TestSkipQuarantinesTheEnvelopeInProc(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	var mu sync.Mutex
	runs := map[string]int{}
	handler := func(ctx context.Context, tn Turn, env []byte) error {
		mu.Lock()
		defer mu.Unlock()
		runs[string(env)]++
		if string(env) == "stuck" {
			return errors.New("boom")
		}
		return nil
	}
	q := &quarantineLog{}
	hd, _ := newTestHandoff(t, rc, prefix, Config{MaxAttempts: 1000, HandlerRetries: -1, QuarantineMinAge: -1, Handler: quarantining(handler, q.hook)}, nil)
	if _, err := Skip(ctx, rc, prefix, "E1"); !errors.Is(err, ErrNothingToSkip) {
		t.Fatalf("skip of an empty proc: %v", err)
	}
	if _, err := hd.Submit(ctx, "E1", []byte("stuck")); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	env, err := Skip(ctx, rc, prefix, "E1")
	if err != nil || string(env) != "stuck" {
		t.Fatalf("skip: %q %v", env, err)
	}
	if err := hd.Resume(ctx, "E1"); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	got := q.all()
	if len(got) != 1 || !got[0].f.Skipped || got[0].f.Attempts != 1 || got[0].envelope != "stuck" {
		t.Fatalf("quarantined: %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["stuck"] != 1 {
		t.Errorf("stuck ran %d times, want 1", runs["stuck"])
	}
}

// With NeverQuarantine, nothing is ever taken out of the turn, however many runs fail.
func TestNoQuarantineHookKeepsTheEnvelope(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	handler := func(ctx context.Context, tn Turn, env []byte) error { return errors.New("boom") }
	hd, _ := newTestHandoff(t, rc, prefix, Config{MaxAttempts: 1, HandlerRetries: -1, NeverQuarantine: true, Handler: quarantining(handler, (&quarantineLog{}).hook)}, nil)
	if _, err := hd.Submit(ctx, "E1", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-hd.Idle()
		if err := hd.Resume(ctx, "E1"); err != nil {
			t.Fatal(err)
		}
	}
	<-hd.Idle()
	info, _ := Inspect(ctx, rc, prefix, "E1")
	if info.Proc == nil || info.Proc.Failure.Attempts != 4 {
		t.Fatalf("proc: %+v", info.Proc)
	}
}

// MaxAttempts quarantines only failures spread over QuarantineMinAge: a burst of failed
// runs in a short outage does not, the same count over a longer span does.
func TestQuarantineWaitsForTheMinimumAge(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	handler := func(ctx context.Context, tn Turn, env []byte) error { return errors.New("postgres restarting") }
	q := &quarantineLog{}
	hd, _ := newTestHandoff(t, rc, prefix, Config{MaxAttempts: 2, HandlerRetries: 3, QuarantineMinAge: 300 * time.Millisecond, Handler: quarantining(handler, q.hook)}, nil)
	if _, err := hd.Submit(ctx, "E1", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	info, _ := Inspect(ctx, rc, prefix, "E1")
	if len(q.all()) != 0 || info.Proc == nil || info.Proc.Failure.Attempts != 4 {
		t.Fatalf("after a burst of 4 failures within the minimum age: quarantined %v, proc %+v", q.all(), info.Proc)
	}
	time.Sleep(350 * time.Millisecond) // the age is the point: the failures must be spread over it
	if err := hd.Resume(ctx, "E1"); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	if got := q.all(); len(got) != 1 || got[0].f.Attempts != 5 {
		t.Fatalf("after the minimum age: %+v", got)
	}
}

// A failed Step whose Result asks for the quarantine quarantines the envelope at its
// first run, whatever MaxAttempts and QuarantineMinAge say.
//
// Broken variant tried: handle ignoring Result.Quarantine: the envelope was re-run and
// never quarantined.
func TestQuarantineNow(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	var runs atomic.Int64
	step := func(ctx context.Context, tn Turn, env []byte) (Result, error) {
		runs.Add(1)
		return Result{Quarantine: true}, fmt.Errorf("ERR_RESULT_TOO_LARGE: too big")
	}
	q := &quarantineLog{}
	hd, _ := newTestHandoff(t, rc, prefix, Config{MaxAttempts: 100, Handler: testHandler{step: step, quarantine: q.hook}}, nil)
	if _, err := hd.Submit(ctx, "E1", []byte("huge")); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	got := q.all()
	if len(got) != 1 || !got[0].f.Immediate || !strings.HasPrefix(got[0].f.LastError, "ERR_RESULT_TOO_LARGE") || runs.Load() != 1 {
		t.Fatalf("quarantined %+v after %d runs", got, runs.Load())
	}
}
