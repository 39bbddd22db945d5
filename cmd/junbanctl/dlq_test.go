package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// dlqTestEnv creates the test's own queues (standard or FIFO, by newQueues) and points all
// four of junbanctl's queue settings at them, so that no case, not even one run against a
// broken variant, touches the stack's orders-dlq or results-dlq.
func dlqTestEnv(t *testing.T, newQueues testenv.NewQueuesFunc) (*sqs.Client, testenv.Queues) {
	t.Helper()
	c := testenv.SQS(t)
	q := newQueues(t, c, 5)
	q.Setenv(t)
	return c, q
}

// deadLetter sends body to the DLQ at dlqURL. On a FIFO DLQ each message gets a group of
// its own, as if each were another entity's, so that none waits for another.
func deadLetter(t *testing.T, c *sqs.Client, dlqURL, body string, attrs map[string]string) {
	t.Helper()
	if err := queue.DeadLetter(context.Background(), c, dlqURL, []byte(body), "ERR_TEST", attrs, ownGroup()); err != nil {
		t.Fatal(err)
	}
}

// ownGroup are FIFO ids no other message has.
func ownGroup() queue.Keys { return queue.Keys{Group: "g-" + testenv.ID(), Dedup: testenv.ID()} }

// peek returns the bodies of the visible messages of url, sorted, and leaves them visible.
func peek(t *testing.T, c *sqs.Client, url string) []string {
	t.Helper()
	ctx := context.Background()
	var bodies, handles []string
	seen := map[string]bool{}
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				bodies = append(bodies, aws.ToString(m.Body))
			}
		}
	}
	release(ctx, c, url, handles)
	slices.Sort(bodies)
	return bodies
}

// take receives and deletes every visible message of url and returns them by body.
func take(t *testing.T, c *sqs.Client, url string) map[string]types.Message {
	t.Helper()
	ctx := context.Background()
	got := map[string]types.Message{}
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return got
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = m
			c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

func TestDLQListAndRedrive(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		for _, body := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
			deadLetter(t, c, q.Orders.DLQURL, body, nil)
		}
		var out bytes.Buffer
		if err := ctl(ctx, &out, "dlq list", []string{"-queue", q.OrdersDLQName}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "ERR_TEST") || !strings.Contains(out.String(), "3 message(s)") {
			t.Fatalf("list printed:\n%s", out.String())
		}
		if err := ctl(ctx, nil, "dlq redrive", []string{"-queue", q.OrdersDLQName, "-max", "2"}); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for len(got) < 2 {
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2, MessageAttributeNames: []string{"All"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Messages) == 0 {
				t.Fatalf("redrive moved %d of 2 messages to the orders queue", len(got))
			}
			for _, m := range out.Messages {
				if _, ok := m.MessageAttributes[queue.AttrDLQReason]; ok {
					t.Errorf("a redriven message still carries its DLQ reason")
				}
				got[aws.ToString(m.Body)] = true
			}
		}
		if len(got) != 2 {
			t.Fatalf("orders queue got %v, want 2 messages", got)
		}
	})
}

// A redrive takes only from junban's own dead-letter queues and never sends into one:
// a queue that is neither JUNBAN_ORDERS_DLQ nor JUNBAN_RESULTS_DLQ (named otherwise, or
// X-dlq beside a queue X) and a --to that names the DLQ (here by its URL) are usage errors
// before anything moves; a message whose junban-source-queue names the DLQ itself goes to
// the queue the DLQ serves like any other. Broken variants: the code before the first
// fix (target TrimSuffix(name, "-dlq"), attribute ignored) re-sent the odd queue's message
// into its own DLQ until the context ended and reported "moved 3" for --to the DLQ; the
// code that followed the attribute moved the X-dlq queue's message to X and left the
// self-sourced message in the DLQ as unroutable.
func TestDLQRedriveRefusesTheDLQAsTarget(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		newQueue := func(name string) string {
			out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			url := aws.ToString(out.QueueUrl)
			t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}) })
			return url
		}
		oddURL := newQueue(testenv.Name(t) + "-deadletter")
		extra := testenv.Name(t) + "-extra"
		extraURL, extraDLQURL := newQueue(extra), newQueue(extra+"-dlq")
		deadLetter(t, c, oddURL, "odd", nil)
		deadLetter(t, c, extraDLQURL, "extra", nil)
		deadLetter(t, c, q.Orders.DLQURL, "plain", nil)

		cases := []struct {
			name  string
			args  []string
			url   string
			usage bool
		}{
			{"name gives no source queue", []string{"-queue", oddURL}, oddURL, true},
			{"name gives no source queue, with --max", []string{"-queue", oddURL, "-max", "3"}, oddURL, true},
			{"--to is the DLQ", []string{"-queue", q.OrdersDLQName, "-to", q.Orders.DLQURL}, q.Orders.DLQURL, true},
			{"X-dlq that is not junban's", []string{"-queue", extra + "-dlq"}, extraDLQURL, true},
			{"X-dlq that is not junban's, with --to", []string{"-queue", extraDLQURL, "-to", extra}, extraDLQURL, true},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				rep, err := ctlRedrive(rctx, tc.args)
				if !errors.Is(err, cli.ErrUsage) {
					t.Fatalf("redrive %q: %v (report %+v), want a usage error", tc.args, err, rep)
				}
				if rep.Total() != 0 {
					t.Fatalf("redrive %q reported %d moved", tc.args, rep.Total())
				}
				if got := peek(t, c, tc.url); len(got) != 1 {
					t.Fatalf("the DLQ holds %q, want its one message", got)
				}
			})
		}

		if got := peek(t, c, extraURL); len(got) != 0 {
			t.Fatalf("the queue beside the X-dlq got %q", got)
		}

		t.Run("source-queue attribute is the DLQ", func(t *testing.T) {
			take(t, c, q.Orders.DLQURL)
			deadLetter(t, c, q.Orders.DLQURL, "self", map[string]string{queue.AttrSourceQueue: q.OrdersDLQName})
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			rep, err := ctlRedrive(rctx, []string{"-queue", q.OrdersDLQName})
			if err != nil || rep.Moved[q.OrdersName] != 1 {
				t.Fatalf("redrive: %v, moved %v; want the message moved to %s", err, rep.Moved, q.OrdersName)
			}
			if got := peek(t, c, q.Orders.DLQURL); len(got) != 0 {
				t.Fatalf("the DLQ holds %q", got)
			}
			if got := peek(t, c, q.Orders.URL); !slices.Equal(got, []string{"self"}) {
				t.Fatalf("the orders queue holds %q, want [self]", got)
			}
		})
	})
}

// failingWorker stands in for a worker that fails every message of from again: it moves
// each one straight back into dlqURL with queue.DeadLetter, as the consumer's Poison or
// the order-worker's parking limit does. attrs gives the attributes the copy keeps.
type failingWorker struct {
	mu   sync.Mutex
	seen map[string]int // deliveries by body
	stop context.CancelFunc
	done chan struct{}
}

func startFailingWorker(t *testing.T, c *sqs.Client, from, dlqURL string, attrs func(types.Message) map[string]string) *failingWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &failingWorker{seen: map[string]int{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			// Short polls: the emulator answers a long poll only when its wait ends, and
			// a comeback must reach the DLQ while the redrive still runs.
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(from), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
			if err != nil {
				continue
			}
			if len(out.Messages) == 0 {
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			for _, m := range out.Messages {
				if err := queue.DeadLetter(ctx, c, dlqURL, []byte(aws.ToString(m.Body)), "ERR_STILL_BROKEN", attrs(m), ownGroup()); err != nil {
					continue
				}
				c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(from), ReceiptHandle: m.ReceiptHandle})
				w.mu.Lock()
				w.seen[aws.ToString(m.Body)]++
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-w.done })
	return w
}

// deliveries returns how often each body reached the worker.
func (w *failingWorker) deliveries() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

// A redrive ends, and moves each message once, while every message it moves fails again
// and comes straight back to the DLQ. Two messages are hidden by a concurrent reader, so
// the depth at the start (the run's bound) is larger than what the run can move: only
// recognising the comebacks stops it from moving them again. Against the code before the
// fix (stop only at an empty receive) the run went on until the context ended, the worker
// seeing each body dozens of times; with the depth bound alone (the body check removed)
// the worker saw the comebacks a second time.
func TestDLQRedriveEndsWhenMessagesComeBack(t *testing.T) {
	cases := []struct {
		name string
		// attrs are the attributes of a dead-lettered copy of m (nil: the first one).
		attrs func(q testenv.Queues, m *types.Message) map[string]string
	}{
		{"consumer poison", func(q testenv.Queues, m *types.Message) map[string]string {
			// The consumer keeps the message's string attributes and names its queue.
			out := map[string]string{queue.AttrSourceQueue: q.OrdersName, "x-origin": "test"}
			if m != nil {
				for k, v := range m.MessageAttributes {
					out[k] = aws.ToString(v.StringValue)
				}
			}
			return out
		}},
		{"parked event", func(testenv.Queues, *types.Message) map[string]string {
			// The order-worker dead-letters a parked event without any attribute.
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
				c, q := dlqTestEnv(t, newQueues)
				ctx := context.Background()
				deadLetter(t, c, q.Orders.DLQURL, "hidden-1", tc.attrs(q, nil))
				deadLetter(t, c, q.Orders.DLQURL, "hidden-2", tc.attrs(q, nil))
				hidden, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.DLQURL), MaxNumberOfMessages: 2, VisibilityTimeout: 120})
				if err != nil || len(hidden.Messages) != 2 {
					t.Fatalf("hiding two messages: %v, got %d", err, len(hidden.Messages))
				}
				poison := []string{"poison-1", "poison-2", "poison-3"}
				for _, b := range poison {
					deadLetter(t, c, q.Orders.DLQURL, b, tc.attrs(q, nil))
				}
				w := startFailingWorker(t, c, q.Orders.URL, q.Orders.DLQURL, func(m types.Message) map[string]string { return tc.attrs(q, &m) })

				const bound = 20 * time.Second
				rctx, cancel := context.WithTimeout(ctx, bound)
				defer cancel()
				start := time.Now()
				rep, err := ctlRedrive(rctx, []string{"-queue", q.OrdersDLQName})
				if err != nil {
					t.Fatalf("redrive did not end by itself: %v after %v; the worker saw %v", err, time.Since(start).Round(time.Millisecond), w.deliveries())
				}
				var out bytes.Buffer
				rep.print(&out)
				t.Logf("run took %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
				if rep.Total() != len(poison) || rep.Moved[q.OrdersName] != len(poison) {
					t.Fatalf("report %+v, want the 3 visible messages moved to %s", rep, q.OrdersName)
				}
				if rep.Depth < 5 || rep.Repeats > len(poison) {
					t.Fatalf("report %+v: depth at the start below 5 or more repeats than moves", rep)
				}
				// The worker fails each moved message once more; then it has seen them all.
				testenv.WaitFor(t, 10*time.Second, "the worker to see the moved messages", func() bool {
					n := 0
					for _, v := range w.deliveries() {
						n += v
					}
					return n >= rep.Total()
				})
				w.stop()
				<-w.done
				for _, b := range poison {
					if n := w.deliveries()[b]; n != 1 {
						t.Errorf("%s reached the orders queue %d times in one run, want once", b, n)
					}
				}
				// No message lost or doubled: all five are back in the DLQ, visible.
				var handles []string
				for _, m := range hidden.Messages {
					handles = append(handles, aws.ToString(m.ReceiptHandle))
				}
				release(ctx, c, q.Orders.DLQURL, handles)
				want := append([]string{"hidden-1", "hidden-2"}, poison...)
				if got := peek(t, c, q.Orders.DLQURL); !slices.Equal(got, want) {
					t.Fatalf("the DLQ holds %q, want %q", got, want)
				}
			})
		})
	}
}

// Every message goes to the queue the DLQ serves, whatever its junban-source-queue
// attribute names (the results queue by name or URL, a queue that does not exist); the
// attribute and the reason stay behind, other attributes travel. Broken variant: the code
// before sent results-by-name and results-by-url to the results queue, where the
// persist-worker writes what it reads, and left "nowhere" in the DLQ.
func TestDLQRedriveIgnoresTheSourceQueueAttribute(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		deadLetter(t, c, q.Orders.DLQURL, "results-by-name", map[string]string{queue.AttrSourceQueue: q.ResultsName, "x-keep": "v"})
		deadLetter(t, c, q.Orders.DLQURL, "results-by-url", map[string]string{queue.AttrSourceQueue: q.Results.URL})
		deadLetter(t, c, q.Orders.DLQURL, "nowhere", map[string]string{queue.AttrSourceQueue: testenv.Name(t) + "-gone"})
		deadLetter(t, c, q.Orders.DLQURL, "plain", nil)
		rep, err := ctlRedrive(ctx, []string{"-queue", q.OrdersDLQName})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{q.OrdersName: 4}; !maps.Equal(rep.Moved, want) {
			t.Fatalf("moved %v, want %v", rep.Moved, want)
		}
		if got := take(t, c, q.Results.URL); len(got) != 0 {
			t.Fatalf("the results queue got %v", slices.Sorted(maps.Keys(got)))
		}
		orders := take(t, c, q.Orders.URL)
		if got := slices.Sorted(maps.Keys(orders)); !slices.Equal(got, []string{"nowhere", "plain", "results-by-name", "results-by-url"}) {
			t.Fatalf("the orders queue got %v", got)
		}
		if a := orders["results-by-name"].MessageAttributes; aws.ToString(a["x-keep"].StringValue) != "v" || a[queue.AttrSourceQueue].StringValue != nil || a[queue.AttrDLQReason].StringValue != nil {
			t.Errorf("attributes after the redrive: %v, want x-keep only", slices.Sorted(maps.Keys(a)))
		}
		if got := peek(t, c, q.Orders.DLQURL); len(got) != 0 {
			t.Fatalf("left in the DLQ: %q", got)
		}
	})
}

// --to names only the queue the DLQ serves: the other main queue (by name or URL), a queue
// that is not junban's and a foreign URL ending in the served queue's name are usage
// errors naming the queue allowed, and nothing moves; the served queue is accepted.
// Broken variant: the code before moved the message to the results queue for
// --to results.
func TestDLQRedriveRefusesATargetItDoesNotServe(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		odd, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name(t) + "-extra")})
		if err != nil {
			t.Fatal(err)
		}
		oddURL := aws.ToString(odd.QueueUrl)
		t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(oddURL)}) })
		deadLetter(t, c, q.Orders.DLQURL, "plain", nil)
		for _, to := range []string{q.ResultsName, q.Results.URL, oddURL, "https://sqs.attacker.example/999999999999/" + q.OrdersName} {
			rep, err := ctlRedrive(ctx, []string{"-queue", q.OrdersDLQName, "-to", to})
			if !errors.Is(err, cli.ErrUsage) || rep.Total() != 0 {
				t.Errorf("--to %s: moved %d, %v; want a usage error", to, rep.Total(), err)
				continue
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", q.OrdersName)) {
				t.Errorf("--to %s: %q does not name %q", to, err, q.OrdersName)
			}
		}
		for _, url := range []string{q.Results.URL, q.Orders.URL, oddURL} {
			if got := peek(t, c, url); len(got) != 0 {
				t.Fatalf("%s got %q", url, got)
			}
		}
		rep, err := ctlRedrive(ctx, []string{"-queue", q.OrdersDLQName, "-to", q.OrdersName})
		if err != nil || rep.Moved[q.OrdersName] != 1 {
			t.Fatalf("--to %s: moved %v, %v", q.OrdersName, rep.Moved, err)
		}
	})
}

// Flags are checked before any message moves: a positional argument (a queue given
// without --queue), an unknown flag, list --max below 1 and redrive --max below 0 are
// usage errors. Against the code before the fix the positional argument was ignored and
// the test's DLQ listed or redriven instead, --max 0 (list) and -1 (redrive) did nothing
// and returned nil, and a bad flag was no usage error.
func TestDLQFlagsAreChecked(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		deadLetter(t, c, q.Orders.DLQURL, "stays", nil)
		dlq := q.OrdersDLQName
		list := func(args []string) error { return ctl(ctx, io.Discard, "dlq list", args) }
		redrive := func(args []string) error { _, err := ctlRedrive(ctx, args); return err }
		cases := []struct {
			name string
			run  func([]string) error
			args []string
		}{
			{"list positional", list, []string{"-queue", dlq, "results-dlq"}},
			{"list unknown flag", list, []string{"-queue", dlq, "-nope"}},
			{"list max 0", list, []string{"-queue", dlq, "-max", "0"}},
			{"list max -1", list, []string{"-queue", dlq, "-max", "-1"}},
			{"redrive positional", redrive, []string{"-queue", dlq, "results-dlq"}},
			{"redrive unknown flag", redrive, []string{"-queue", dlq, "-nope"}},
			{"redrive max -1", redrive, []string{"-queue", dlq, "-max", "-1"}},
		}
		for _, tc := range cases {
			if err := tc.run(tc.args); !errors.Is(err, cli.ErrUsage) {
				t.Errorf("%s %q: %v, want a usage error", tc.name, tc.args, err)
			}
		}
		if got := peek(t, c, q.Orders.DLQURL); !slices.Equal(got, []string{"stays"}) {
			t.Fatalf("the DLQ holds %q, want [stays]", got)
		}
		if got := peek(t, c, q.Orders.URL); len(got) != 0 {
			t.Fatalf("the orders queue got %q", got)
		}
	})
}

// Without --queue, list and redrive work on JUNBAN_ORDERS_DLQ. Against the code before
// the fix they used the stack's orders-dlq (list is run first: it only reads).
func TestDLQDefaultsToTheConfiguredDLQ(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		deadLetter(t, c, q.Orders.DLQURL, "configured-"+testenv.ID(), nil)
		var out bytes.Buffer
		if err := ctl(ctx, &out, "dlq list", nil); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "configured-") {
			t.Fatalf("list without --queue printed:\n%s", out.String())
		}
		rep, err := ctlRedrive(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Moved[q.OrdersName] != 1 || rep.Total() != 1 {
			t.Fatalf("redrive without --queue moved %v, want 1 to %s", rep.Moved, q.OrdersName)
		}
	})
}

// A receive that brings only repeats of a body already moved does not end the run: they
// are hidden from then on, and the messages behind them still move. Flag mistakes are
// usage errors even without any SQS setting. (Against the first version of the rewrite,
// 21 copies of one body ahead of a good message ended the run after one move, exit 0,
// with the good message left; and `dlq list --bogus` without AWS_REGION was a config
// error. Both tried.)
func TestDLQRedriveGoesPastRepeats(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c, q := dlqTestEnv(t, newQueues)
		ctx := context.Background()
		for range 21 {
			deadLetter(t, c, q.Orders.DLQURL, "same", nil)
		}
		deadLetter(t, c, q.Orders.DLQURL, "good", nil)
		rep, err := ctlRedrive(ctx, []string{"-queue", q.OrdersDLQName})
		if err != nil {
			t.Fatal(err)
		}
		got := take(t, c, q.Orders.URL)
		if _, ok := got["good"]; !ok || len(got) != 2 || rep.Total() != 2 || rep.Repeats != 20 {
			t.Fatalf("moved %v (report: %d moved, %d repeats), want same once and good", slices.Sorted(maps.Keys(got)), rep.Total(), rep.Repeats)
		}

		t.Setenv("AWS_REGION", "")
		t.Setenv("JUNBAN_STACK_ENV", "/nonexistent/stack.env")
		if err := ctl(ctx, io.Discard, "dlq list", []string{"--bogus"}); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("dlq list --bogus without AWS_REGION: %v, want a usage error", err)
		}
	})
}
