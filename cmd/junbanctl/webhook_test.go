package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/fleet"
	"github.com/junban/junban/internal/testenv"
)

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
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) || gw.Exited() {
			t.Fatalf("gateway not ready: %v\n%s", err, gw.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Setenv("JUNBAN_WEBHOOK_PROVIDERS", providers)
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	err = runWebhookStorm(context.Background(), []string{
		"-url", "http://" + addr, "-provider", "acme", "-n", "50", "-retries", "2",
		"-retry-delay", "200ms", "-queue", q.Orders.URL, "-lcid", "LC-STORM",
	})
	if err != nil {
		t.Fatalf("storm: %v", err)
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
			time.Sleep(50 * time.Millisecond)
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
