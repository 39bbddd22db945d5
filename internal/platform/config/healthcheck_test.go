package config

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// AskHealth passes on a 200 only, asks a wildcard address on the loopback interface and
// refuses port 0, which nothing can be asked on.
func TestAskHealth(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"redis":"ok"}`))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ctx := context.Background()
	for _, addr := range []string{srv.Listener.Addr().String(), "0.0.0.0:" + port, ":" + port} {
		if err := AskHealth(ctx, addr, "/readyz"); err != nil {
			t.Errorf("%s, 200: %v", addr, err)
		}
	}
	if err := AskHealth(ctx, srv.Listener.Addr().String(), "/healthz"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v, want an error naming it", err)
	}
	status = http.StatusServiceUnavailable
	if err := AskHealth(ctx, srv.Listener.Addr().String(), "/readyz"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "redis") {
		t.Errorf("503: %v, want an error with the status and the body", err)
	}
	if err := AskHealth(ctx, "127.0.0.1:0", "/readyz"); err == nil || !strings.Contains(err.Error(), "port 0") {
		t.Errorf("port 0: %v", err)
	}
	if err := AskHealth(ctx, "8080", "/readyz"); err == nil {
		t.Error("an address without a host:port: no error")
	}
}
