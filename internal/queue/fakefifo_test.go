package queue_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// fakeFIFO is an SQS FIFO queue in memory, behind the SQS JSON protocol, for the part of
// FIFO's behaviour neither local emulator has: one receive brings several messages of a
// group (fauxqs brings one), and no message of a group is delivered while one of it is in
// flight (local-aws-sqs delivers them). It serves ReceiveMessage, DeleteMessageBatch and
// ChangeMessageVisibilityBatch, what a consumer calls.
type fakeFIFO struct {
	mu     sync.Mutex
	groups []string              // in the order of their first message
	msgs   map[string][]*fakeMsg // by group, in order
	byRcpt map[string]*fakeMsg   // by receipt handle
	seq    int
	backs  map[string]int // visibility-0 changes by body (messages handed back)
}

type fakeMsg struct {
	id, body, group, receipt string
	receives                 int
	visibleAt                time.Time
}

// newFakeFIFO serves a FIFO queue holding bodies "<group>:<n>" in the order given, and
// returns a client for it and the queue's URL.
func newFakeFIFO(t *testing.T, bodies ...string) (*fakeFIFO, *sqs.Client, string) {
	f := &fakeFIFO{msgs: map[string][]*fakeMsg{}, byRcpt: map[string]*fakeMsg{}, backs: map[string]int{}}
	for _, b := range bodies {
		g, _, _ := strings.Cut(b, ":")
		if _, ok := f.msgs[g]; !ok {
			f.groups = append(f.groups, g)
		}
		f.seq++
		f.msgs[g] = append(f.msgs[g], &fakeMsg{id: "id-" + strconv.Itoa(f.seq), body: b, group: g})
	}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	return f, c, srv.URL + "/000000000000/fake.fifo"
}

func (f *fakeFIFO) serve(w http.ResponseWriter, r *http.Request) {
	var in struct {
		MaxNumberOfMessages int
		WaitTimeSeconds     int
		VisibilityTimeout   *int
		Entries             []struct {
			Id, ReceiptHandle string
			VisibilityTimeout int
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var out any
	switch op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS."); op {
	case "ReceiveMessage":
		vis := 30
		if in.VisibilityTimeout != nil {
			vis = *in.VisibilityTimeout
		}
		deadline := time.Now().Add(time.Duration(in.WaitTimeSeconds) * time.Second)
		ms := f.receive(max(in.MaxNumberOfMessages, 1), vis)
		for len(ms) == 0 && time.Now().Before(deadline) && r.Context().Err() == nil {
			time.Sleep(10 * time.Millisecond)
			ms = f.receive(max(in.MaxNumberOfMessages, 1), vis)
		}
		out = map[string]any{"Messages": ms}
	case "DeleteMessageBatch", "ChangeMessageVisibilityBatch":
		var ok []map[string]string
		f.mu.Lock()
		for _, e := range in.Entries {
			m := f.byRcpt[e.ReceiptHandle]
			if m == nil {
				continue
			}
			if op == "DeleteMessageBatch" {
				f.remove(m)
			} else {
				m.visibleAt = time.Now().Add(time.Duration(e.VisibilityTimeout) * time.Second)
				if e.VisibilityTimeout == 0 {
					f.backs[m.body]++
				}
			}
			ok = append(ok, map[string]string{"Id": e.Id})
		}
		f.mu.Unlock()
		out = map[string]any{"Successful": ok, "Failed": []any{}}
	default:
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#UnsupportedOperation", "message": op})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	json.NewEncoder(w).Encode(out)
}

// receive takes up to n messages as SQS does from a FIFO queue: from each group with no
// message in flight, its messages from the head in order, several of one group at once.
func (f *fakeFIFO) receive(n, vis int) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	var out []map[string]any
	for _, g := range f.groups {
		ms := f.msgs[g]
		if len(ms) == 0 || ms[0].visibleAt.After(now) {
			continue // empty, or its head in flight: the group is held
		}
		for _, m := range ms {
			if len(out) == n || m.visibleAt.After(now) {
				break
			}
			delete(f.byRcpt, m.receipt)
			f.seq++
			m.receipt, m.visibleAt = "r-"+strconv.Itoa(f.seq), now.Add(time.Duration(vis)*time.Second)
			m.receives++
			f.byRcpt[m.receipt] = m
			out = append(out, map[string]any{"MessageId": m.id, "ReceiptHandle": m.receipt, "Body": m.body,
				"Attributes": map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives), "MessageGroupId": m.group}})
		}
	}
	return out
}

func (f *fakeFIFO) remove(m *fakeMsg) {
	delete(f.byRcpt, m.receipt)
	ms := f.msgs[m.group]
	for i, x := range ms {
		if x == m {
			f.msgs[m.group] = append(ms[:i:i], ms[i+1:]...)
			return
		}
	}
}

// On a FIFO queue as SQS serves it, where one receive brings several messages of a group,
// a Retry hands the group's later messages of that receive back unhandled, and they come
// again after the retried one, in order; the other groups go on meanwhile. Broken
// variants: the group's rest handled after the Retry (g0:3 was handled before g0:2 was
// done); one handler per message (the messages of a group ran at once).
func TestFIFOConsumerRetryHandsTheGroupsRestBack(t *testing.T) {
	t.Parallel()
	var bodies []string
	for g := range 3 {
		for i := range 5 {
			bodies = append(bodies, "g"+strconv.Itoa(g)+":"+strconv.Itoa(i))
		}
	}
	f, c, url := newFakeFIFO(t, bodies...)
	h := &groupHandler{retry: "g0:2", done: map[string]map[int]bool{}, active: map[string]int{}}
	cons, err := queue.NewConsumer(queue.ConsumerConfig{Client: c, Handler: h.handle, QueueURL: url, DLQURL: url + "-dlq",
		Concurrency: 20, WaitTimeSeconds: 1, VisibilityTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, cons)
	testenv.WaitFor(t, 20*time.Second, "every message done", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := 0
		for _, d := range h.done {
			n += len(d)
		}
		return n == len(bodies)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.problems {
		t.Error(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range []string{"g0:3", "g0:4"} {
		if f.backs[b] != 1 {
			t.Errorf("%s handed back %d times, want once", b, f.backs[b])
		}
	}
}
