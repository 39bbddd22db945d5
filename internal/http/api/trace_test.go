package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/junban/junban/internal/testenv"
)

// TestRequestIsAServerSpan: a request with a traceparent header is served in a server
// span of that trace, named by its method and route pattern.
func TestRequestIsAServerSpan(t *testing.T) {
	rcv, shutdown := testenv.Tracing(t, "junban-api")

	e := newEnv(t)
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/orders/LC-NONE", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+readToken)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range rcv.Spans() {
		if s.Kind == "server" && s.TraceID == traceID && s.ParentSpanID == parent && s.Name == "GET /v1/orders/{lcid}" && s.Service == "junban-api" {
			return
		}
	}
	t.Fatalf("spans %+v: want a junban-api server span GET /v1/orders/{lcid} in the request's trace", rcv.Spans())
}
