package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stripe/stripe-go/v82"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/fleet"
)

// What `webhook send` sends as a Stripe provider is an event that stripe-go's own
// ConstructEvent accepts with the same secret (signature, tolerance, and an api_version
// of its release train), and that the gateway still parses into the same facts. (Fails
// with webhook.Encode's body alone: "Received event with API version , but stripe-go
// 82.5.1 expects API version 2025-08-27.basil"; tried.)
func TestWebhookSendStripeBodyIsAStripeEvent(t *testing.T) {
	const secret = "whsec_c3RyaXBlLWNvbnN0cnVjdC1ldmVudC10ZXN0"
	for _, typ := range []string{"payment_intent.succeeded", "charge.refunded"} {
		f := webhookFlags{
			url: "http://127.0.0.1:1", provider: "shop", kind: "stripe", secret: secret, typ: typ,
			lcid: "LC-STRIPE-1", amount: 1234, currency: "jpy", timeout: time.Second,
		}
		w, err := f.build()
		if err != nil {
			t.Fatal(err)
		}
		h, err := w.Provider.Sign(w.ID, time.Now(), w.Body)
		if err != nil {
			t.Fatal(err)
		}
		e, err := stripewebhook.ConstructEvent(w.Body, h.Get(webhook.HeaderStripeSignature), secret)
		if err != nil {
			t.Fatalf("%s: stripe-go refuses the body: %v\n%s", typ, err, w.Body)
		}
		if e.ID != w.ID || string(e.Type) != typ || e.Object != "event" || e.APIVersion != stripe.APIVersion ||
			e.Livemode || e.PendingWebhooks != 1 || e.Created <= 0 {
			t.Fatalf("%s: stripe-go read %+v", typ, e)
		}
		obj := e.Data.Object
		wantObject := map[string]string{"payment_intent.succeeded": "payment_intent", "charge.refunded": "charge"}[typ]
		if obj["object"] != wantObject || obj["amount"] != 1234.0 || obj["metadata"].(map[string]any)["lcid"] != "LC-STRIPE-1" {
			t.Fatalf("%s: data.object %v", typ, obj)
		}
		if _, err := stripewebhook.ConstructEvent(w.Body, h.Get(webhook.HeaderStripeSignature), secret+"x"); err == nil {
			t.Fatalf("%s: stripe-go accepted the body under another secret", typ)
		}
		pe, err := webhook.Parse(webhook.KindStripe, "", w.Body)
		if err != nil || pe.ID != w.ID || pe.LCID != "LC-STRIPE-1" || pe.Amount != 1234 || pe.Type != typ {
			t.Fatalf("%s: the gateway parses %+v, %v", typ, pe, err)
		}
	}
}

// The storm harness against a real gateway process: it fails unless exactly one order
// event reached the queue and every answer was 200 or 409.
func TestWebhookStormAgainstTheGateway(t *testing.T) {
	_, prefix := testenv.Redis(t)
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	addr, err := fleet.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const providers = "acme:standard:whsec_c3Rvcm0tdGVzdC1zZWNyZXQtMTIzNDU2"
	gw := testenv.Start(t, "webhook-gateway", testenv.Binary(t, "webhook-gateway"), append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+prefix, "JUNBAN_HTTP_ADDR="+addr, "JUNBAN_WEBHOOK_PROVIDERS="+providers,
		"JUNBAN_ORDERS_QUEUE="+q.Orders.URL, "JUNBAN_LOG_LEVEL=warn"))
	testenv.WaitFor(t, 20*time.Second, "the gateway to be ready", func() bool {
		if gw.Exited() {
			t.Fatalf("gateway exited before it was ready:\n%s", gw.Output())
		}
		resp, err := http.Get("http://" + addr + "/healthz") // the public listener's; /readyz is on the admin one
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	t.Setenv("JUNBAN_WEBHOOK_PROVIDERS", providers)
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	var rep stormReport
	err = decode(t, &rep, "webhook storm",
		"-url", "http://"+addr, "-provider", "acme", "-n", "50", "-retries", "2",
		"-retry-delay", "200ms", "-queue", q.Orders.URL, "-lcid", "LC-STORM")
	if err != nil {
		t.Fatalf("storm: %v (%+v)", err, rep)
	}
	if rep.Deliveries != 50 || rep.OK+rep.Conflicts != 52 || rep.Others != 0 || rep.Answers["retry 200 (replayed)"] != 2 ||
		rep.OrderEvents == nil || *rep.OrderEvents != 1 || !rep.CountComplete || len(rep.Problems) != 0 || rep.Provider != "acme" {
		t.Fatalf("storm --json: %+v", rep)
	}

	// Another event, once.
	var sent webhookSendReport
	err = decode(t, &sent, "webhook send", "--url", "http://"+addr, "--provider", "acme", "--lcid", "LC-STORM-2")
	if err != nil || sent.Status != http.StatusOK || sent.Replayed || sent.Body == "" {
		t.Fatalf("webhook send --json: %+v, %v", sent, err)
	}
}

// On a queue that never goes quiet (a live orders queue) the count must still end, and
// say that it is incomplete. (Before, it read until a receive came back empty: with a
// sender every 50 ms it ran until the test's 20 s timeout; tried.)
func TestStormCountEndsOnABusyQueue(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 5)
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	defer func(g time.Duration) { countGrace = g }(countGrace)
	countGrace = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.Orders.URL), MessageBody: aws.String(`{"event_id":"other"}`)})
			time.Sleep(50 * time.Millisecond) // deliberate: a sender every 50 ms keeps the queue busy
		}
	}()
	found, complete, err := countOrderEvents(ctx, q.OrdersName, "wanted", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if complete || found != 0 {
		t.Errorf("count on a busy queue: found %d, complete %v; want 0, incomplete", found, complete)
	}
}
