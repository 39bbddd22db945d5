package queue_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zaptest"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

func consumerConfig(t *testing.T, q queue.Pair) queue.ConsumerConfig {
	return queue.ConsumerConfig{
		QueueURL:        q.URL,
		DLQURL:          q.DLQURL,
		WaitTimeSeconds: 1,
		ShutdownBudget:  5 * time.Second,
		Registerer:      prometheus.NewRegistry(),
		Logger:          zaptest.NewLogger(t),
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestConsumerDoneDeletes(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	sendBodies(t, c, q.URL, bodies("done", 25)...)

	rec := newRecorder()
	var traced atomic.Int32
	cfg := consumerConfig(t, q)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		rec.add(m)
		if trace.SpanContextFromContext(ctx).IsValid() {
			traced.Add(1)
		}
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 30*time.Second, "25 messages handled", func() bool { return rec.distinct() == 25 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := queueDepth(t, c, q.URL); n != 0 {
		t.Fatalf("queue holds %d messages after Done", n)
	}
	if got := metricValue(t, reg, "junban_queue_deleted_total"); got < 25 {
		t.Fatalf("deleted_total %v, want 25", got)
	}
	if got := metricValue(t, reg, "junban_queue_in_flight"); got != 0 {
		t.Fatalf("in_flight %v after shutdown", got)
	}
	if traced.Load() != 0 {
		t.Fatal("handler saw a trace context that no message carried (tracing is off)")
	}
}

// metricValue is the value of the one series of a counter or gauge in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestConsumerRetryComesBack(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	sendBodies(t, c, q.URL, "again")

	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		if rec.add(m) == 1 {
			return queue.Outcome{Verdict: queue.Retry, Reason: "not yet", After: time.Second}
		}
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	// The queue's visibility timeout is 10 s: seeing it again sooner proves the Retry's After.
	testenv.WaitFor(t, 8*time.Second, "the retried message to come back", func() bool { return len(rec.get("again")) >= 2 })
	stop()
	calls := rec.get("again")
	if calls[1].ReceiveCount <= calls[0].ReceiveCount {
		t.Fatalf("ReceiveCount %d then %d, want it to grow", calls[0].ReceiveCount, calls[1].ReceiveCount)
	}
	if n := queueDepth(t, c, q.URL); n != 0 {
		t.Fatalf("queue holds %d messages", n)
	}
}

func TestConsumerPoisonGoesToDLQ(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Orders
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(context.Background())
	ctx := remoteParent(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if err := pub.Publish(ctx, []byte("bad"), map[string]string{"origin": "test"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(context.Background(), [][]byte{[]byte("good0"), []byte("good1"), []byte("good2")}); err != nil {
		t.Fatal(err)
	}

	rec := newRecorder()
	var sawTrace atomic.Bool
	cfg := consumerConfig(t, q)
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		rec.add(m)
		if string(m.Body) == "bad" {
			sawTrace.Store(trace.SpanContextFromContext(ctx).TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736")
			return queue.Outcome{Verdict: queue.Poison, Reason: "ERR_MALFORMED: not json"}
		}
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 30*time.Second, "4 messages handled", func() bool { return rec.distinct() == 4 })
	stop()
	// This process does not trace (the tests that do run first, one at a time): a
	// sender's trace context is ignored (TestSendAndProcessSpansJoinOneTrace has it joined
	// while tracing).
	if sawTrace.Load() {
		t.Error("the handler's context carries the sender's trace while the process does not trace")
	}
	dead := receiveAll(t, c, q.DLQURL, 1, 5*time.Second)
	if len(dead) != 1 || aws.ToString(dead[0].Body) != "bad" {
		t.Fatalf("DLQ holds %d messages, want the bad one", len(dead))
	}
	attrs := dead[0].MessageAttributes
	for k, want := range map[string]string{
		queue.AttrDLQReason:   "ERR_MALFORMED: not json",
		queue.AttrSourceQueue: queueNameOf(q.URL),
		"origin":              "test",
		queue.AttrTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		if got := aws.ToString(attrs[k].StringValue); got != want {
			t.Errorf("DLQ attribute %s = %q, want %q", k, got, want)
		}
	}
	if n := queueDepth(t, c, q.URL); n != 0 {
		t.Fatalf("source queue holds %d messages; the poison one must be deleted", n)
	}
}

func queueNameOf(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}

// TestConsumerBackPressure: never more than Concurrency handlers at once, although every
// receive could bring ten messages.
func TestConsumerBackPressure(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Orders
	sendBodies(t, c, q.URL, bodies("bp", 30)...)

	var running, peak atomic.Int32
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.Concurrency = 3
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond) // deliberate: each handler runs a while, so they overlap
		running.Add(-1)
		rec.add(m)
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 60*time.Second, "30 messages handled", func() bool { return rec.distinct() == 30 })
	stop()
	if p := peak.Load(); p > 3 {
		t.Fatalf("%d handlers ran at once, Concurrency is 3", p)
	}
}

// TestConsumerHeartbeat: a handler that runs 5 s on a queue with a 2 s visibility timeout
// keeps its message invisible: nobody else receives it meanwhile.
func TestConsumerHeartbeat(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 3).Orders
	sendBodies(t, c, q.URL, "slow")

	started := make(chan struct{})
	var calls atomic.Int32
	cfg := consumerConfig(t, q)
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		if calls.Add(1) == 1 {
			close(started)
		}
		time.Sleep(5 * time.Second) // deliberate: the handler outlasts the visibility timeout
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("message never handled")
	}
	// A second consumer polls while the handler runs (past the 3 s timeout: without the
	// heartbeats the message would be visible again within the 4 s it polls).
	other := receiveAll(t, c, q.URL, 1, 4*time.Second)
	if len(other) != 0 {
		t.Fatalf("the slow message was delivered again while its handler ran")
	}
	testenv.WaitFor(t, 20*time.Second, "the slow message to be deleted", func() bool { return queueDepth(t, c, q.URL) == 0 })
	stop()
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

// TestConsumerGracefulShutdown: on cancel, a handler that finishes within the budget gets
// its message deleted; the others get a cancelled context and their messages go back to
// the queue at once (the queue's visibility timeout is 60 s); Run returns even though one
// handler ignores its context.
func TestConsumerGracefulShutdown(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 60).Orders
	sendBodies(t, c, q.URL, "quick", "patient", "stubborn")

	var startedWG sync.WaitGroup
	startedWG.Add(3)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	shutdown := make(chan struct{})
	var patientCancelled atomic.Bool
	cfg := consumerConfig(t, q)
	cfg.ShutdownBudget = 3 * time.Second
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		startedWG.Done()
		<-shutdown
		switch string(m.Body) {
		case "quick":
			time.Sleep(300 * time.Millisecond) // deliberate: it finishes after the cancel, within the budget
			return queue.Outcome{Verdict: queue.Done}
		case "patient":
			<-ctx.Done()
			patientCancelled.Store(true)
			return queue.Outcome{Verdict: queue.Retry, Reason: "shutting down"}
		default:
			<-release // ignores its context
			return queue.Outcome{Verdict: queue.Retry}
		}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	waited := make(chan struct{})
	go func() { startedWG.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("handlers did not start")
	}
	close(shutdown)
	began := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Generous: this only catches a Run that waits for the stubborn handler.
	if took := time.Since(began); took > cfg.ShutdownBudget+5*time.Second {
		t.Fatalf("shutdown took %v, budget %v", took, cfg.ShutdownBudget)
	}
	if !patientCancelled.Load() {
		t.Error("the patient handler's context was not cancelled")
	}
	back := receiveAll(t, c, q.URL, 2, 10*time.Second)
	got := map[string]bool{}
	for _, m := range back {
		got[aws.ToString(m.Body)] = true
	}
	if len(back) != 2 || !got["patient"] || !got["stubborn"] {
		t.Fatalf("handed back %v, want patient and stubborn", got)
	}
	// Everything left is in flight now: the two just received, and quick unless deleted.
	if n := inFlight(t, c, q.URL); n != 2 {
		t.Fatalf("%d messages in flight, want 2 (quick deleted)", n)
	}
}

func TestBatchConsumerGroups(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 10).Results
	sendBodies(t, c, q.URL, bodies("b", 24)...)
	sendBodies(t, c, q.URL, "poison", "retry")

	var mu sync.Mutex
	var sizes []int
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.BatchMax = 10
	cfg.BatchWindow = time.Second
	cfg.Concurrency = 1
	cfg.Client = c
	cfg.BatchHandler = func(ctx context.Context, ms []queue.Message) []queue.Outcome {
		mu.Lock()
		sizes = append(sizes, len(ms))
		mu.Unlock()
		outs := make([]queue.Outcome, len(ms))
		for i, m := range ms {
			n := rec.add(m)
			switch {
			case string(m.Body) == "poison":
				outs[i] = queue.Outcome{Verdict: queue.Poison, Reason: "never valid"}
			case string(m.Body) == "retry" && n == 1:
				outs[i] = queue.Outcome{Verdict: queue.Retry, After: time.Second}
			default:
				outs[i] = queue.Outcome{Verdict: queue.Done}
			}
		}
		return outs
	}
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 30*time.Second, "26 messages handled, the retried one twice", func() bool { return rec.distinct() == 26 && len(rec.get("retry")) == 2 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	grouped := false
	for _, n := range sizes {
		if n > cfg.BatchMax {
			t.Fatalf("a batch of %d, BatchMax %d", n, cfg.BatchMax)
		}
		grouped = grouped || n > 1
	}
	if !grouped {
		t.Fatalf("batches %v: never more than one message", sizes)
	}
	if n := queueDepth(t, c, q.URL); n != 0 {
		t.Fatalf("queue holds %d messages", n)
	}
	if dead := receiveAll(t, c, q.DLQURL, 1, 5*time.Second); len(dead) != 1 || aws.ToString(dead[0].Body) != "poison" {
		t.Fatalf("DLQ holds %d messages, want the poison one", len(dead))
	}
}

func TestConsumerConfigValidate(t *testing.T) {
	err := queue.ConsumerConfig{Concurrency: -1, MaxMessages: 11, WaitTimeSeconds: 21, VisibilityTimeout: 1500 * time.Millisecond}.Validate()
	testenv.ErrorNames(t, err, "QueueURL", "DLQURL", "Concurrency", "MaxMessages", "WaitTimeSeconds", "VisibilityTimeout")
	if err := (queue.ConsumerConfig{QueueURL: "http://x/q", DLQURL: "http://x/d"}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := queue.NewConsumer(queue.ConsumerConfig{}); err == nil {
		t.Fatal("NewConsumer accepted a nil handler")
	}
}

func TestRetryDelay(t *testing.T) {
	base, capd := time.Second, 12*time.Hour
	for n := 1; n <= 40; n++ {
		step := base << min(n-1, 20)
		step = min(step, capd)
		for range 20 {
			d := queue.RetryDelay(n, base, capd)
			if d < step/2 || d > step {
				t.Fatalf("receive %d: delay %v outside [%v, %v]", n, d, step/2, step)
			}
		}
	}
	if d := queue.RetryDelay(100, time.Hour, 48*time.Hour); d > 12*time.Hour {
		t.Fatalf("delay %v beyond SQS's 12 h", d)
	}
}

// TestConsumerPoisonKeptWhenDLQFails: a Poison message whose DLQ send fails is not
// deleted; SQS delivers it again.
func TestConsumerPoisonKeptWhenDLQFails(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 1).Orders
	sendBodies(t, c, q.URL, "cursed")

	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.DLQURL = q.DLQURL + "-missing"
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		rec.add(m)
		return queue.Outcome{Verdict: queue.Poison, Reason: "never valid"}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 20*time.Second, "the poison message to be redelivered", func() bool { return len(rec.get("cursed")) >= 2 })
	stop()
}

// TestConsumerReceiveFill: handlers that free their slots one at a time. With ReceiveFill
// a receive waits until all ten slots are free and asks for ten messages; without it
// (tried: ReceiveFill 0 fails here, asking for 1.8 messages on average) each receive
// asks for the one or two slots just freed, and the queue costs several times the calls.
func TestConsumerReceiveFill(t *testing.T) {
	t.Parallel()
	base := testenv.SQS(t)
	q := testenv.NewQueues(t, base, 30).Orders
	sendBodies(t, base, q.URL, bodies("fill", 100)...)

	var mu sync.Mutex
	var asks []int32
	c := onReceive(base, func(r *sqs.ReceiveMessageInput) func() {
		mu.Lock()
		asks = append(asks, r.MaxNumberOfMessages)
		mu.Unlock()
		return func() {}
	})
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.Concurrency, cfg.Receivers, cfg.ReceiveFill = 10, 2, 2*time.Second
	var n atomic.Int32
	cfg.Client = c
	cfg.Handler = func(ctx context.Context, m queue.Message) queue.Outcome {
		// Handlers end at different times: 10-37 ms.
		time.Sleep(time.Duration(10+n.Add(1)%10*3) * time.Millisecond)
		rec.add(m)
		return queue.Outcome{Verdict: queue.Done}
	}
	cons, err := queue.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilHandled(t, cons, rec, 100, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	var sum int32
	for _, a := range asks {
		sum += a
	}
	if avg := float64(sum) / float64(len(asks)); avg < 9 {
		t.Fatalf("receives asked for %.1f messages on average (%v), want 10 but for a fill timeout", avg, asks)
	}
}

// receiveOverlap wraps c so that it records the most ReceiveMessage calls in flight at once.
func receiveOverlap(c *sqs.Client) (*sqs.Client, *atomic.Int32) {
	var cur, peak atomic.Int32
	return onReceive(c, func(*sqs.ReceiveMessageInput) func() {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return func() { cur.Add(-1) }
	}), &peak
}

// TestBatchConsumerSharedReceivers: four receivers in flight at once fill one batch between
// them. Variants tried: a collecting loop per receiver (the persist-worker's old 16
// consumers) fails on the batch size, with batches of half the messages ([50 50]); one
// receive at a time fails on the overlap.
func TestBatchConsumerSharedReceivers(t *testing.T) {
	t.Parallel()
	base := testenv.SQS(t)
	q := testenv.NewQueues(t, base, 30).Results
	sendBodies(t, base, q.URL, bodies("s", 100)...)
	c, overlap := receiveOverlap(base)

	var mu sync.Mutex
	var sizes []int
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	cfg.BatchMax, cfg.BatchWindow, cfg.Receivers, cfg.Concurrency = 100, 3*time.Second, 4, 2
	cfg.Client = c
	cfg.BatchHandler = recordDone(rec, func(ms []queue.Message) {
		mu.Lock()
		sizes = append(sizes, len(ms))
		mu.Unlock()
	})
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilHandled(t, cons, rec, 100, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if biggest := slices.Max(sizes); biggest < 90 {
		t.Errorf("batches %v: the receivers did not fill one batch between them", sizes)
	}
	for _, s := range []string{"s0", "s50", "s99"} {
		if n := len(rec.get(s)); n != 1 {
			t.Errorf("%s handled %d times", s, n)
		}
	}
	if p := overlap.Load(); p < 2 {
		t.Errorf("at most %d receive in flight, want several", p)
	}
	if n := queueDepth(t, base, q.URL) + inFlight(t, base, q.URL); n != 0 {
		t.Errorf("%d messages left in the queue", n)
	}
}

// TestBatchConsumerSharedBackPressure: while the only batch handler is stuck, the receivers
// take no more than the batch being handled and the one being collected.
func TestBatchConsumerSharedBackPressure(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Results
	sendBodies(t, c, q.URL, bodies("bp", 60)...)

	release := make(chan struct{})
	rec := newRecorder()
	cfg := consumerConfig(t, q)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.BatchMax, cfg.BatchWindow, cfg.Receivers, cfg.Concurrency = 10, 100*time.Millisecond, 3, 1
	cfg.Client = c
	cfg.BatchHandler = recordDone(rec, func([]queue.Message) { <-release })
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 30*time.Second, "the first batch to be received", func() bool {
		return metricValue(t, reg, "junban_queue_received_total") >= 10
	})
	time.Sleep(2 * time.Second) // deliberate: time for the receivers to take more than they may
	if got := metricValue(t, reg, "junban_queue_received_total"); got > 20 || got < 10 {
		t.Errorf("received %v messages while the handler was stuck, want 10-20", got)
	}
	close(release)
	testenv.WaitFor(t, 30*time.Second, "60 messages handled", func() bool { return rec.distinct() == 60 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchConsumerSharedShutdown: a batch still collecting when Run stops is handled (a
// handler is free), not dropped. A batch collects while another call is in flight (a lone
// one goes at once): the first, of one message, is held until the second was handled.
func TestBatchConsumerSharedShutdown(t *testing.T) {
	t.Parallel()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30).Results

	rec := newRecorder()
	cfg := consumerConfig(t, q)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.BatchMax, cfg.BatchWindow, cfg.Receivers, cfg.Concurrency = 100, time.Minute, 2, 2
	cfg.Client = c
	var calls atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	cfg.BatchHandler = recordDone(rec, func(ms []queue.Message) {
		if calls.Add(1) == 1 {
			close(held)
			<-release
			return
		}
		close(release)
	})
	cons, err := queue.NewBatchConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	sendBodies(t, c, q.URL, "first")
	<-held
	sendBodies(t, c, q.URL, bodies("sd", 5)...)
	testenv.WaitFor(t, 30*time.Second, "the 5 messages to be received", func() bool { return metricValue(t, reg, "junban_queue_received_total") == 6 })
	if calls.Load() != 1 {
		t.Fatal("a batch went out before its window, BatchMax or the call in flight returned")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if rec.distinct() != 6 {
		t.Fatalf("handled %d of the 6 messages (5 collected) at shutdown", rec.distinct())
	}
	if n := queueDepth(t, c, q.URL) + inFlight(t, c, q.URL); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
}
