package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/dlq"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/queue"
)

// An event whose runs fail is listed as stuck; a skip through the API (admin) marks it
// and nudges a worker, whose resume quarantines it; a second skip is a conflict.
func TestStuckTurnsAndSkip(t *testing.T) {
	now := time.Now()
	e := newEnv(t, func(d *Deps, o *Options) { d.Now = func() time.Time { return now } })
	var mu sync.Mutex
	var skipped []lockhandoff.Failure
	hd, err := lockhandoff.New(lockhandoff.Config{
		Redis:  e.rc,
		Prefix: e.prefix, MaxAttempts: 1000, HandlerRetries: 1,
		Handler: lockhandoff.Funcs{OnQuarantine: func(ctx context.Context, tn lockhandoff.Turn, env []byte, f lockhandoff.Failure) (lockhandoff.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			skipped = append(skipped, f)
			return lockhandoff.Result{}, nil
		}, OnStep: func(ctx context.Context, tn lockhandoff.Turn, env []byte) (lockhandoff.Result, error) {
			if tn.Entity == "LC-OK" {
				return lockhandoff.Result{}, nil
			}
			return lockhandoff.Result{}, errors.New("stock service away")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hd.Stop(context.Background()) }()
	for _, lcid := range []string{"LC-STUCK", "LC-OK", "LC-STUCK2"} {
		body := fmt.Sprintf(`{"event_id":"evt-%s","type":"payment.confirmed","lcid":"%s","occurred_at":"2026-12-01T10:00:00Z"}`, lcid, lcid)
		if _, err := hd.Submit(ctx, lcid, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	<-hd.Idle()

	code, body := e.do("GET", "/v1/turns/stuck?limit=1", readToken, nil)
	var page StuckList
	decode(t, body, &page)
	if code != 200 || len(page.Turns) != 1 || page.Turns[0].Turn.Entity != "LC-STUCK" || page.NextCursor == "" ||
		page.Turns[0].Why[0] != "failed_runs" || page.Turns[0].Turn.Proc.Attempts != 2 {
		t.Fatalf("stuck, page 1: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/turns/stuck?limit=1&cursor="+page.NextCursor, readToken, nil)
	page = StuckList{}
	decode(t, body, &page)
	if code != 200 || len(page.Turns) != 1 || page.Turns[0].Turn.Entity != "LC-STUCK2" {
		t.Fatalf("stuck, page 2: %d %s", code, body)
	}
	// Later, the same events are also old.
	now = now.Add(time.Hour)
	code, body = e.do("GET", "/v1/turns/stuck?older_than=30m", readToken, nil)
	page = StuckList{}
	decode(t, body, &page)
	if code != 200 || len(page.Turns) != 2 || len(page.Turns[0].Why) != 2 || page.Turns[0].Why[1] != "old_event" || page.OlderThan != "30m0s" {
		t.Fatalf("stuck an hour later: %d %s", code, body)
	}
	if code, _ := e.do("GET", "/v1/turns/stuck?older_than=-1s", readToken, nil); code != 400 {
		t.Errorf("negative bound: %d", code)
	}

	code, body = e.do("POST", "/v1/turns/LC-STUCK/skip", adminToken, nil)
	var ans SkipAnswer
	decode(t, body, &ans)
	if code != 202 || ans.EventID != "evt-LC-STUCK" || !ans.Nudged || ans.Reason != "ERR_SKIPPED" {
		t.Fatalf("skip: %d %s", code, body)
	}
	out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	nudged := false
	for _, m := range out.Messages {
		var o event.Order
		if json.Unmarshal([]byte(aws.ToString(m.Body)), &o) == nil && o.Type == event.Drain && o.LCID == "LC-STUCK" {
			nudged = true
		}
	}
	if !nudged {
		t.Fatalf("no drain nudge for LC-STUCK on the orders queue")
	}
	if err := hd.Resume(ctx, "LC-STUCK"); err != nil {
		t.Fatal(err)
	}
	<-hd.Idle()
	mu.Lock()
	if len(skipped) != 1 || !skipped[0].Skipped {
		t.Fatalf("quarantined: %+v", skipped)
	}
	mu.Unlock()
	if code, body := e.do("POST", "/v1/turns/LC-STUCK/skip", adminToken, nil); code != 409 {
		t.Fatalf("second skip: %d %s", code, body)
	}
	if code, _ := e.do("POST", "/v1/turns/LC%7B1%7D/skip", adminToken, nil); code != 400 {
		t.Fatalf("skip of a bad lcid: %d", code)
	}
	code, body = e.do("GET", "/v1/turns/stuck?older_than=30m", readToken, nil)
	page = StuckList{}
	decode(t, body, &page)
	if code != 200 || len(page.Turns) != 1 || page.Turns[0].Turn.Entity != "LC-STUCK2" {
		t.Fatalf("stuck after the skip: %d %s", code, body)
	}
}

// DLQ list leaves the messages in the queue; redrive moves them to their queue; only
// configured dead-letter queues are reachable.
func TestDLQListAndRedrive(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		attrs := map[string]string{}
		if i == 0 {
			attrs[queue.AttrSourceQueue] = e.q.OrdersName
		}
		if err := queue.DeadLetter(ctx, e.sqs, e.q.Orders.DLQURL, []byte(fmt.Sprintf(`{"n":%d}`, i)), "ERR_TEST detail", attrs, queue.Keys{}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := e.do("GET", "/v1/dlq/"+e.q.OrdersDLQName, adminToken, nil)
	var l DLQList
	decode(t, body, &l)
	if code != 200 || len(l.Messages) != 3 || l.More || l.Messages[0].Reason != "ERR_TEST detail" || l.Messages[0].SentAt.IsZero() {
		t.Fatalf("list: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/dlq/"+e.q.OrdersDLQName+"?limit=2", adminToken, nil)
	l = DLQList{}
	decode(t, body, &l)
	if code != 200 || len(l.Messages) != 2 || !l.More {
		t.Fatalf("list, limit 2: %d %s", code, body)
	}
	// Listed messages stay: the list made them visible again.
	code, body = e.do("GET", "/v1/dlq/"+e.q.OrdersDLQName, adminToken, nil)
	l = DLQList{}
	decode(t, body, &l)
	if code != 200 || len(l.Messages) != 3 {
		t.Fatalf("list after listing: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/v1/dlq/" + e.q.OrdersName:                        404, // not a DLQ
		"/v1/dlq/some-other-dlq":                           404,
		"/v1/dlq/" + e.q.OrdersDLQName + "?limit=0":        400,
		"/v1/dlq/" + e.q.OrdersDLQName + "?visibility=999": 400,
	} {
		if code, body := e.do("GET", path, adminToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
	if code, body := e.do("POST", "/v1/dlq/"+e.q.OrdersDLQName+"/redrive", adminToken, RedriveRequest{Max: -1}); code != 400 {
		t.Errorf("redrive max -1: %d %s", code, body)
	}
	if code, body := e.do("POST", "/v1/dlq/"+e.q.OrdersDLQName+"/redrive", adminToken, RedriveRequest{To: e.q.OrdersDLQName}); code != 400 {
		t.Errorf("redrive into the DLQ itself: %d %s", code, body)
	}
	code, body = e.do("POST", "/v1/dlq/"+e.q.OrdersDLQName+"/redrive", adminToken, RedriveRequest{Max: 2})
	var rep dlq.Report
	decode(t, body, &rep)
	if code != 200 || rep.Total() != 2 || rep.Moved[e.q.OrdersName] != 2 {
		t.Fatalf("redrive max 2: %d %s", code, body)
	}
	code, body = e.do("POST", "/v1/dlq/"+e.q.OrdersDLQName+"/redrive", adminToken, nil)
	rep = dlq.Report{}
	decode(t, body, &rep)
	if code != 200 || rep.Total() != 1 {
		t.Fatalf("redrive the rest: %d %s", code, body)
	}
	got := map[string]bool{}
	for len(got) < 3 {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.q.Orders.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("orders queue holds %v of 3 (%v)", got, err)
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = true
		}
	}
}
