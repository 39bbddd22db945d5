package webhook_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/testenv"
)

// TestDeliveryTraceReachesTheOrdersQueue: a signed delivery whose request carries a
// traceparent is served in a server span of that trace, the order event is sent in a child
// send span, and the message on the orders queue carries the send span's context; the
// gateway's log lines about it carry the trace and the event.
func TestDeliveryTraceReachesTheOrdersQueue(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "webhook-gateway")

	g := newGateway(t, options{})
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	body := stripeBody(t, "evt_trace", "payment_intent.succeeded", "LC-1", 1200)
	h, err := g.stripe.Sign("", g.clock(), body)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("traceparent", incoming)
	if a := g.post(delivery{provider: g.stripe, body: body, header: h}); a.code != http.StatusOK {
		t.Fatalf("answer %d %s", a.code, a.body)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	var server, send *testenv.Span
	spans := rcv.Spans()
	for i, s := range spans {
		switch {
		case s.Kind == "server":
			server = &spans[i]
		case s.Kind == "producer":
			send = &spans[i]
		}
	}
	if server == nil || send == nil {
		t.Fatalf("spans %+v: want a server and a producer span", spans)
	}
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	if server.TraceID != traceID || server.ParentSpanID != parent || server.Name != "POST /webhooks/{provider}" {
		t.Errorf("server span %+v: want %q in the request's trace", server, "POST /webhooks/{provider}")
	}
	if server.Attrs["junban.event_id"] == "" || server.Attrs["junban.lcid"] != "LC-1" {
		t.Errorf("server span attributes %v: want the event id and the lcid", server.Attrs)
	}
	if send.TraceID != traceID || send.ParentSpanID != server.SpanID || send.Attrs["messaging.system"] != "aws_sqs" {
		t.Errorf("send span %+v: want an SQS send, child of the server span", send)
	}

	out, err := g.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(g.queueURL), MaxNumberOfMessages: 1, WaitTimeSeconds: 2, MessageAttributeNames: []string{"All"},
	})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v (%d messages)", err, len(out.Messages))
	}
	tp := aws.ToString(out.Messages[0].MessageAttributes["traceparent"].StringValue)
	if want := "00-" + traceID + "-" + send.SpanID + "-01"; tp != want {
		t.Errorf("message traceparent %q, want %q (the send span)", tp, want)
	}

	found := false
	for _, e := range g.logs.FilterMessage("webhook handled").All() {
		f := e.ContextMap()
		found = f["trace_id"] == traceID && f["event_id"] != "" && f["lcid"] == "LC-1"
	}
	if !found {
		t.Errorf("no \"webhook handled\" line with trace_id, event_id and lcid: %v", g.logs.All())
	}
}
