package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/http/webhooksend"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
)

// tracedFleet is the webhook-gateway, two order-workers and a persist-worker as processes,
// each exporting its spans to one real OTLP receiver.
type tracedFleet struct {
	rcv      *testenv.OTLPReceiver
	db       *gorm.DB
	queues   testenv.Queues
	gateway  string // base URL
	gw       *testenv.Proc
	provider webhook.Provider
	run      string
}

func startTracedFleet(t *testing.T) *tracedFleet {
	t.Helper()
	f := &tracedFleet{rcv: testenv.StartOTLPReceiver(t), run: "TR" + testenv.ID()}
	_, prefix := testenv.Redis(t)
	pgURL := testenv.PostgresURL(t)
	var err error
	if f.db, err = (config.Postgres{URL: pgURL}).Open(); err != nil {
		t.Fatal(err)
	}
	c := testenv.SQS(t)
	f.queues = testenv.NewQueues(t, c, 20)
	const secret = "whsec_trace_e2e_secret_0123456789"
	if f.provider, err = webhook.NewProvider("stripe", webhook.KindStripe, secret); err != nil {
		t.Fatal(err)
	}
	q := f.queues
	env := append(append(testenv.Env(t), f.rcv.Env()...),
		"JUNBAN_KEY_PREFIX="+prefix, "DATABASE_URL="+pgURL,
		"JUNBAN_ORDERS_QUEUE="+q.Orders.URL, "JUNBAN_ORDERS_DLQ="+q.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+q.Results.URL, "JUNBAN_RESULTS_DLQ="+q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=info", "JUNBAN_SHUTDOWN_BUDGET=5s",
	)
	for i := range 2 {
		testenv.Start(t, fmt.Sprintf("order-worker-%d", i), testenv.Binary(t, "order-worker"), env)
	}
	testenv.Start(t, "persist-worker", testenv.Binary(t, "persist-worker"), env)
	f.gw = testenv.Start(t, "webhook-gateway", testenv.Binary(t, "webhook-gateway"), append(env,
		"JUNBAN_HTTP_ADDR=127.0.0.1:0", "JUNBAN_WEBHOOK_PROVIDERS=stripe:stripe:"+secret))
	testenv.WaitFor(t, time.Minute, "the webhook-gateway listening", func() bool {
		f.gateway = listening(f.gw.Output())
		return f.gateway != "" || f.gw.Exited()
	})
	if f.gateway == "" {
		t.Fatal("the webhook-gateway ended before listening")
	}
	return f
}

// listening finds the gateway's address in its JSON log lines.
func listening(out string) string {
	for _, m := range logLines(out, "webhook-gateway listening") {
		if m["addr"] != "" {
			return "http://" + m["addr"]
		}
	}
	return ""
}

// logLines are a process's JSON log lines with message msg, their string fields.
func logLines(out, msg string) []map[string]string {
	var lines []map[string]string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != msg {
			continue
		}
		fields := map[string]string{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				fields[k] = s
			}
		}
		lines = append(lines, fields)
	}
	return lines
}

// placeOrder places an order for a SKU of its own straight on the orders queue (a trace of
// its own) and waits for its result in PostgreSQL; it returns the lcid.
func (f *tracedFleet) placeOrder(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	sku, lcid := f.run+"-"+name+"-SKU", f.run+"-"+name
	if err := loadgen.Import(ctx, f.db, []stock.SKU{{SKU: sku, Lots: []stock.Lot{{
		LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 10}}}}); err != nil {
		t.Fatal(err)
	}
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: testenv.SQS(t), QueueURL: f.queues.Orders.URL, Keys: domain.OrderKeys})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Stop(ctx)
	data, _ := json.Marshal(event.OrderData{Mode: stock.ModeShip, TargetDate: time.Now().UTC().Format("2006-01-02"),
		Lines: []event.Line{{LineID: "1", SKU: sku, Qty: 2}}})
	e := event.Order{EventID: lcid + "-placed", Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(), Data: data}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(ctx, [][]byte{b}); err != nil {
		t.Fatal(err)
	}
	f.waitApplied(t, e.EventID)
	return lcid
}

// pay delivers a signed Stripe payment_intent.succeeded for lcid to the gateway, with the
// traceparent header when it is not empty, and returns the order event's id.
func (f *tracedFleet) pay(t *testing.T, lcid, traceparent string) string {
	t.Helper()
	id := "evt_" + lcid
	body, err := webhooksend.Body(webhook.KindStripe, webhook.ProviderEvent{
		ID: id, Type: webhooksend.PaymentSucceeded(webhook.KindStripe), LCID: lcid,
		OccurredAt: time.Now().UTC(), PaymentID: "pi_" + lcid, Amount: 1200, Currency: "jpy",
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.provider.Sign(id, time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	if traceparent != "" {
		h.Set("traceparent", traceparent)
	}
	req, err := http.NewRequest(http.MethodPost, f.gateway+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ans, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gateway answered %d %s", resp.StatusCode, ans)
	}
	return webhook.OrderEventID("stripe", id)
}

// waitApplied waits for eventID's result in PostgreSQL's inbox and returns its row.
func (f *tracedFleet) waitApplied(t *testing.T, eventID string) persist.InboxRow {
	t.Helper()
	var row persist.InboxRow
	testenv.WaitFor(t, time.Minute, "the result of "+eventID+" in PostgreSQL", func() bool {
		var rows []persist.InboxRow
		if f.db.Where("event_id = ?", eventID).Find(&rows).Error != nil || len(rows) == 0 {
			return false
		}
		row = rows[0]
		return true
	})
	return row
}

// traceTree checks the spans of one webhook's trace: it answers the trace id it found
// and what is missing or wrong ("" and a problem while the gateway's span has not come).
func (f *tracedFleet) traceTree(eventID string) (string, []string) {
	spans := f.rcv.Spans()
	var server *testenv.Span
	for i, s := range spans {
		if s.Service == "webhook-gateway" && s.Kind == "server" && s.Attrs["junban.event_id"] == eventID {
			server = &spans[i]
		}
	}
	if server == nil {
		return "", []string{"no webhook-gateway server span with junban.event_id " + eventID}
	}
	var problems []string
	if server.Name != "POST /webhooks/{provider}" {
		problems = append(problems, "the gateway's server span is named "+server.Name)
	}
	tid := server.TraceID
	// child finds the span of the trace named name under parent, from service.
	child := func(parent *testenv.Span, service, kind, name string) *testenv.Span {
		if parent == nil {
			return nil
		}
		for i, s := range spans {
			if s.TraceID == tid && s.ParentSpanID == parent.SpanID && s.Service == service && s.Name == name && (kind == "" || s.Kind == kind) {
				return &spans[i]
			}
		}
		problems = append(problems, fmt.Sprintf("no %s span %q (%s) under %q", service, name, kind, parent.Name))
		return nil
	}
	orders, results := queue.NameOf(f.queues.Orders.URL), queue.NameOf(f.queues.Results.URL)
	send := child(server, "webhook-gateway", "producer", "send "+orders)
	process := child(send, "order-worker", "consumer", "process "+orders)
	step := child(process, "order-worker", "", "step")
	child(step, "order-worker", "", "commit")
	publish := child(step, "order-worker", "producer", "send "+results)
	if step != nil {
		if step.Attrs["junban.event_id"] != eventID || step.Attrs["junban.outcome"] == "" {
			problems = append(problems, fmt.Sprintf("step attributes %v", step.Attrs))
		}
		for _, s := range spans {
			if s.TraceID == tid && strings.HasPrefix(s.Name, "ledger ") && s.ParentSpanID != step.SpanID {
				problems = append(problems, s.Name+" is not under the step")
			}
		}
	}
	if publish == nil {
		return tid, problems
	}
	// The persist-worker's batch is a trace of its own linked to each result's send.
	var batch *testenv.Span
	for i, s := range spans {
		if s.Service == "persist-worker" && s.Kind == "consumer" && s.Name == "process "+results &&
			slices.Contains(s.Links, tid+"/"+publish.SpanID) {
			batch = &spans[i]
		}
	}
	if batch == nil {
		return tid, append(problems, "no persist-worker batch span linked to the result's send")
	}
	found := false
	for _, s := range spans {
		found = found || s.Service == "persist-worker" && s.Name == "apply batch" && s.TraceID == batch.TraceID && s.ParentSpanID == batch.SpanID
	}
	if !found {
		problems = append(problems, "no persist-worker \"apply batch\" span under its batch span")
	}
	return tid, problems
}

// TestTraceAcrossThreeServices: one signed payment webhook for an order placed earlier
// gives one trace across three processes: the gateway's server span, its SQS send, the
// order-worker's process span, the step with its commit and the result's send; the
// persist-worker's batch span (a trace of its own) links that send and holds the
// transaction's span. The result in PostgreSQL names the trace.
func TestTraceAcrossThreeServices(t *testing.T) {
	f := startTracedFleet(t)
	lcid := f.placeOrder(t, "A")
	eventID := f.pay(t, lcid, "")
	row := f.waitApplied(t, eventID)

	var tid string
	var problems []string
	// The spans come in the processes' export batches: wait for the tree, within a bound.
	deadline := time.Now().Add(time.Minute)
	for {
		if tid, problems = f.traceTree(eventID); len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if row.TraceID != tid {
		t.Errorf("the result in PostgreSQL names trace %q, the webhook's is %q", row.TraceID, tid)
	}
	// The gateway's line about the delivery names the event, its order and its trace.
	handled := false
	for _, m := range logLines(f.gw.Output(), "webhook handled") {
		handled = handled || m["level"] == "info" && m["event_id"] == eventID && m["lcid"] == lcid && m["trace_id"] == tid && m["span_id"] != ""
	}
	if !handled {
		t.Errorf("no info line \"webhook handled\" with event_id %s, lcid %s, trace_id %s and span_id", eventID, lcid, tid)
	}
	services := map[string]bool{}
	for _, s := range f.rcv.Spans() {
		if s.TraceID == tid {
			services[s.Service] = true
		}
	}
	if !services["webhook-gateway"] || !services["order-worker"] {
		t.Errorf("services in the trace %v: want webhook-gateway and order-worker", services)
	}
	if t.Failed() {
		for _, s := range f.rcv.Spans() {
			t.Logf("span %s %s %s trace %s id %s parent %s links %v", s.Service, s.Kind, s.Name, s.TraceID, s.SpanID, s.ParentSpanID, s.Links)
		}
	}
}

// TestSampledOutTraceCostsNoSpans: a webhook whose traceparent says "not sampled" (flags
// 00) under the default parent-based sampler is applied, and none of the three services
// sends a span of its trace.
func TestSampledOutTraceCostsNoSpans(t *testing.T) {
	f := startTracedFleet(t)
	lcid := f.placeOrder(t, "S")
	const tid = "5bf92f3577b34da6a3ce929d0e0e4737"
	eventID := f.pay(t, lcid, "00-"+tid+"-00f067aa0ba902b7-00")
	row := f.waitApplied(t, eventID)
	if row.TraceID != "" {
		t.Errorf("the result in PostgreSQL names trace %q, want none", row.TraceID)
	}
	// A sampled webhook sent after it, whose whole tree has come, proves every process
	// has exported what it recorded for the sampled-out one.
	after := f.pay(t, f.placeOrder(t, "T"), "")
	f.waitApplied(t, after)
	deadline := time.Now().Add(time.Minute)
	for {
		if _, problems := f.traceTree(after); len(problems) == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the later webhook's trace did not come: %q", problems)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range f.rcv.Spans() {
		if s.TraceID == tid {
			t.Errorf("span %s %q of the sampled-out trace", s.Service, s.Name)
		}
		for _, l := range s.Links {
			if strings.HasPrefix(l, tid+"/") {
				// The persist-worker's batch span (a root of its own) links every
				// result's sender, sampled or not: a link, not a span of the trace.
				t.Logf("span %s %q links the sampled-out trace", s.Service, s.Name)
			}
		}
		if s.Attrs["junban.event_id"] == eventID {
			t.Errorf("span %s %q (trace %s) of the sampled-out event", s.Service, s.Name, s.TraceID)
		}
	}
}
