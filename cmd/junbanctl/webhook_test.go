package main

import (
	"context"
	"net/http"
	"testing"
	"time"

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
