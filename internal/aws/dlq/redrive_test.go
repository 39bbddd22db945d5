package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// foreignURL is the URL of a queue that is not junban's: another host and account, with
// the name given.
func foreignURL(name string) string { return "https://sqs.attacker.example/999999999999/" + name }

// sqsConfig names the test's queues as junban's configuration does.
func sqsConfig(q testenv.Queues) config.SQS {
	return config.SQS{OrdersQueue: q.OrdersName, OrdersDLQ: q.OrdersDLQName, ResultsQueue: q.ResultsName, ResultsDLQ: q.ResultsDLQName}
}

// extraQueue creates a queue that is not one of junban's and deletes it when the test ends.
func extraQueue(t *testing.T, c *sqs.Client, name string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}) })
	return url
}

// listed returns the bodies List finds in the queue at url, sorted; they stay there.
func listed(t *testing.T, c *sqs.Client, url string) []string {
	t.Helper()
	msgs, _, err := List(context.Background(), c, url, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Body)
	}
	slices.Sort(out)
	return out
}

// forged is a result body for an order no order-worker saw: what a persist-worker would
// write as a shipped, paid order if it reached the results queue.
func forged(via string) string {
	return fmt.Sprintf(`{"lcid":"FORGED-ORDER-1","status":"shipped","payment_status":"paid","via":%q}`, via)
}

// A dead letter does not choose where a redrive sends it. On the orders DLQ, a result body
// whose junban-source-queue names the results queue (by name or URL), a foreign queue, the
// DLQ itself or a queue that does not exist goes to the orders queue, as one without the
// attribute does; nothing reaches the results queue. The results DLQ's messages go to the
// results queue whatever theirs say. Broken variant: the code before (the attribute chose
// the target) sent the two forged results to the results queue, where the persist-worker
// writes them, and left three messages in the DLQ as unroutable.
func TestRedriveSendsOnlyToTheServedQueue(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		cfg := sqsConfig(q)
		sources := map[string]string{
			"results-by-name": q.ResultsName,
			"results-by-url":  q.Results.URL,
			"foreign":         foreignURL(q.ResultsName),
			"the-dlq":         q.OrdersDLQName,
			"gone":            testenv.Name(t) + "-gone",
			"none":            "",
		}
		var want []string
		for via, src := range sources {
			attrs := map[string]string{queue.AttrSourceQueue: src}
			if src == "" {
				attrs = nil
			}
			if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(forged(via)), "ERR_TEST forged", attrs); err != nil {
				t.Fatal(err)
			}
			want = append(want, forged(via))
		}
		slices.Sort(want)
		if err := deadLetter(ctx, c, q.Results.DLQURL, []byte(`{"result":"r1"}`), "ERR_TEST", map[string]string{queue.AttrSourceQueue: q.OrdersName}); err != nil {
			t.Fatal(err)
		}

		rep, err := Redrive(ctx, c, cfg, RedriveOptions{DLQ: q.OrdersDLQName})
		if err != nil {
			t.Fatalf("redrive of the orders DLQ: %v (report %+v)", err, rep)
		}
		if w := map[string]int{q.OrdersName: len(sources)}; !maps.Equal(rep.Moved, w) {
			t.Errorf("moved %v, want %v", rep.Moved, w)
		}
		if got := bodies(t, c, q.Results.URL); len(got) != 0 {
			t.Fatalf("the results queue got %q from the orders DLQ", got)
		}
		if got := bodies(t, c, q.Orders.URL); !slices.Equal(got, want) {
			t.Fatalf("the orders queue got %q, want %q", got, want)
		}
		if got := listed(t, c, q.Orders.DLQURL); len(got) != 0 {
			t.Fatalf("left in the orders DLQ: %q", got)
		}

		rep, err = Redrive(ctx, c, cfg, RedriveOptions{DLQ: q.ResultsDLQName})
		if err != nil || !maps.Equal(rep.Moved, map[string]int{q.ResultsName: 1}) {
			t.Fatalf("redrive of the results DLQ: moved %v, %v; want 1 to %s", rep.Moved, err, q.ResultsName)
		}
		if got := bodies(t, c, q.Orders.URL); len(got) != 0 {
			t.Fatalf("the orders queue got %q from the results DLQ", got)
		}
		if got := bodies(t, c, q.Results.URL); !slices.Equal(got, []string{`{"result":"r1"}`}) {
			t.Fatalf("the results queue got %q", got)
		}
	})
}

// To names only the queue the DLQ serves (its configured name or URL, or left out):
// another of junban's queues, either DLQ, a queue that is not junban's and a foreign URL
// that ends in the served queue's name are refused before anything moves, with an error
// that names the queue allowed. Broken variant: the code before moved the message without
// a source queue to the results queue (to = results, by name or URL) and to the extra
// queue.
func TestRedriveRefusesATargetItDoesNotServe(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		cfg := sqsConfig(q)
		extra := testenv.Name(t) + "-extra"
		extraURL := extraQueue(t, c, extra)
		if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(forged("to")), "ERR_TEST", nil); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{q.ResultsName, q.Results.URL, q.ResultsDLQName, q.OrdersDLQName, q.Orders.DLQURL,
			extra, extraURL, foreignURL(q.OrdersName), q.OrdersName + " ", strings.ToUpper(q.OrdersName)} {
			rep, err := Redrive(ctx, c, cfg, RedriveOptions{DLQ: q.OrdersDLQName, To: to})
			if !errors.Is(err, ErrBadTarget) || rep.Total() != 0 {
				t.Errorf("redrive to %q: moved %v, %v; want ErrBadTarget and nothing moved", to, rep.Moved, err)
				continue
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", q.OrdersName)) {
				t.Errorf("redrive to %q: %q does not name the queue allowed, %q", to, err, q.OrdersName)
			}
		}
		for _, url := range []string{q.Results.URL, q.Orders.URL, extraURL} {
			if got := bodies(t, c, url); len(got) != 0 {
				t.Fatalf("%s got %q", url, got)
			}
		}
		if got := listed(t, c, q.Orders.DLQURL); !slices.Equal(got, []string{forged("to")}) {
			t.Fatalf("the orders DLQ holds %q, want its message", got)
		}
		for _, to := range []string{q.OrdersName, q.Orders.URL, ""} {
			if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(forged("to "+to)), "ERR_TEST", nil); err != nil {
				t.Fatal(err)
			}
			rep, err := Redrive(ctx, c, cfg, RedriveOptions{DLQ: q.OrdersDLQName, To: to})
			if err != nil || rep.Moved[q.OrdersName] < 1 {
				t.Fatalf("redrive to %q: moved %v, %v; want the orders queue", to, rep.Moved, err)
			}
		}
		if got := bodies(t, c, q.Results.URL); len(got) != 0 {
			t.Fatalf("the results queue got %q", got)
		}
	})
}

// Only junban's own dead-letter queues are redriven, named as the configuration names
// them or by their URL: a queue named X-dlq that is not one of them, and a foreign URL
// that ends in the orders DLQ's name, are refused, with or without a To. Broken variant:
// the code before moved the extra DLQ's message to the queue its name suggests.
func TestRedriveOnlyFromJunbansDLQs(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		cfg := sqsConfig(q)
		extra := testenv.Name(t) + "-extra"
		extraURL := extraQueue(t, c, extra)
		extraDLQURL := extraQueue(t, c, extra+"-dlq")
		if err := deadLetter(ctx, c, extraDLQURL, []byte(forged("extra")), "ERR_TEST", map[string]string{queue.AttrSourceQueue: extra}); err != nil {
			t.Fatal(err)
		}
		for _, o := range []RedriveOptions{
			{DLQ: extra + "-dlq"}, {DLQ: extraDLQURL}, {DLQ: extra + "-dlq", To: q.OrdersName},
			{DLQ: foreignURL(q.OrdersDLQName)}, {DLQ: foreignURL(q.OrdersDLQName), To: q.OrdersName},
		} {
			rep, err := Redrive(ctx, c, cfg, o)
			if !errors.Is(err, ErrBadTarget) || rep.Total() != 0 {
				t.Errorf("redrive %+v: moved %v, %v; want ErrBadTarget and nothing moved", o, rep.Moved, err)
				continue
			}
			testenv.ErrorNames(t, err, fmt.Sprintf("%q", q.OrdersDLQName), fmt.Sprintf("%q", q.ResultsDLQName))
		}
		for _, url := range []string{extraURL, q.Orders.URL, q.Results.URL} {
			if got := bodies(t, c, url); len(got) != 0 {
				t.Fatalf("%s got %q", url, got)
			}
		}
		if got := listed(t, c, extraDLQURL); len(got) != 1 {
			t.Fatalf("the extra DLQ holds %q, want its message", got)
		}
		// The orders DLQ by its URL is junban's.
		if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(forged("by url")), "ERR_TEST", nil); err != nil {
			t.Fatal(err)
		}
		if rep, err := Redrive(ctx, c, cfg, RedriveOptions{DLQ: q.Orders.DLQURL}); err != nil || rep.Moved[q.OrdersName] != 1 {
			t.Fatalf("redrive of the orders DLQ by URL: moved %v, %v", rep.Moved, err)
		}
	})
}

// Pick moves a chosen message to the queue the DLQ serves, whatever its
// junban-source-queue says. Broken variant: the code before sent the forged result to the
// results queue.
func TestPickMovesToTheServedQueueOnly(t *testing.T) {
	testenv.EachQueueKind(t, func(t *testing.T, newQueues testenv.NewQueuesFunc) {
		c := testenv.SQS(t)
		q := newQueues(t, c, 5)
		ctx := context.Background()
		if err := deadLetter(ctx, c, q.Orders.DLQURL, []byte(forged("pick")), "ERR_TEST", map[string]string{queue.AttrSourceQueue: q.ResultsName}); err != nil {
			t.Fatal(err)
		}
		rep, err := Pick(ctx, c, sqsConfig(q), PickOptions{DLQ: q.OrdersDLQName, Action: Move, Match: func(m Message) bool { return m.Source == q.ResultsName }})
		if err != nil || rep.Done != 1 || !maps.Equal(rep.Moved, map[string]int{q.OrdersName: 1}) {
			t.Fatalf("pick: %+v %v; want 1 moved to %s", rep, err, q.OrdersName)
		}
		if got := bodies(t, c, q.Results.URL); len(got) != 0 {
			t.Fatalf("the results queue got %q", got)
		}
		if got := bodies(t, c, q.Orders.URL); !slices.Equal(got, []string{forged("pick")}) {
			t.Fatalf("the orders queue got %q", got)
		}
		// A DLQ that is not junban's is refused.
		extraDLQURL := extraQueue(t, c, testenv.Name(t)+"-extra-dlq")
		if err := deadLetter(ctx, c, extraDLQURL, []byte(forged("extra")), "ERR_TEST", nil); err != nil {
			t.Fatal(err)
		}
		if rep, err := Pick(ctx, c, sqsConfig(q), PickOptions{DLQ: extraDLQURL, Action: Move, Match: func(Message) bool { return true }}); !errors.Is(err, ErrBadTarget) || rep.Done != 0 {
			t.Fatalf("pick from a DLQ not junban's: %+v %v; want ErrBadTarget", rep, err)
		}
	})
}
