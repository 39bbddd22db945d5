package main_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func apiEnv(t *testing.T, extra ...string) []string {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	_, prefix := testenv.Redis(t)
	return append(append(testenv.Env(t),
		"DATABASE_URL="+testenv.PostgresURL(t),
		"JUNBAN_KEY_PREFIX="+prefix,
		"JUNBAN_ORDERS_QUEUE="+q.OrdersName, "JUNBAN_ORDERS_DLQ="+q.OrdersDLQName,
		"JUNBAN_RESULTS_QUEUE="+q.ResultsName, "JUNBAN_RESULTS_DLQ="+q.ResultsDLQName,
		"JUNBAN_SHUTDOWN_BUDGET=5s"), extra...)
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// The built binary: probes and metrics on JUNBAN_HTTP_ADDR, the API on JUNBAN_API_ADDR
// behind its tokens, which never reach the log; SIGTERM stops it.
func TestAPIBinary(t *testing.T) {
	health, apiAddr := freeAddr(t), freeAddr(t)
	const token = "binary-read-token-0123456789"
	p := testenv.Start(t, "junban-api", testenv.Binary(t, "junban-api"), apiEnv(t,
		"JUNBAN_HTTP_ADDR="+health, "JUNBAN_API_ADDR="+apiAddr, "JUNBAN_API_READ_TOKENS="+token))
	testenv.WaitFor(t, 30*time.Second, "junban-api to be ready", func() bool {
		if p.Exited() {
			t.Fatalf("junban-api exited before it was ready:\n%s", p.Output())
		}
		code, _ := get(t, "http://"+health+"/readyz", "")
		return code == 200
	})
	if code, b := get(t, "http://"+apiAddr+"/v1/turns/stuck", token); code != 200 || !strings.Contains(b, `"turns":[]`) {
		t.Fatalf("stuck turns: %d %s", code, b)
	}
	if code, _ := get(t, "http://"+apiAddr+"/v1/turns/stuck", ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, b := get(t, "http://"+apiAddr+"/openapi.json", ""); code != 200 || !strings.Contains(b, `"openapi": "3.1.0"`) {
		t.Fatalf("openapi.json: %d %.200s", code, b)
	}
	if _, b := get(t, "http://"+health+"/metrics", ""); !strings.Contains(b, `junban_api_requests_total{code="401",route="/v1/turns/stuck"} 1`) {
		t.Errorf("/metrics lacks the request counter:\n%.2000s", b)
	}
	if err, ok := p.Stop(10 * time.Second); !ok || err != nil {
		t.Fatalf("SIGTERM: exited %v, %v\n%s", ok, err, p.Output())
	}
	if strings.Contains(p.Output(), token) {
		t.Fatalf("the token was logged:\n%s", p.Output())
	}
	if !strings.Contains(p.Output(), "junban-api listening") {
		t.Fatalf("no start line:\n%s", p.Output())
	}
}

// A non-loopback address without a token: the binary refuses to start, naming the fix.
func TestAPIBinaryRefusesAnOpenWideAddress(t *testing.T) {
	p := testenv.Start(t, "junban-api", testenv.Binary(t, "junban-api"), apiEnv(t, "JUNBAN_API_ADDR=0.0.0.0:0"))
	testenv.WaitFor(t, 30*time.Second, "junban-api to refuse to start and exit", p.Exited)
	if err, _ := p.Stop(time.Second); err == nil {
		t.Fatalf("exit status 0:\n%s", p.Output())
	}
	if out := p.Output(); !strings.Contains(out, "JUNBAN_API_ADDR") || !strings.Contains(out, "JUNBAN_API_READ_TOKENS") {
		t.Fatalf("output:\n%s", out)
	}
}

// send sends method url with Host host (and a form body for a POST) and answers the
// status and body.
func send(t *testing.T, method, url, host, form string) (int, string) {
	t.Helper()
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// Without tokens (as make demo runs it) the binary answers only its own names: a page
// that rebinds evil.example to 127.0.0.1 gets 421 from the API and the console alike,
// before any handler reads a DLQ or redrives it. JUNBAN_API_ALLOWED_HOSTS adds names.
// Broken variant tried: the binary before the Host check answered evil.example's DLQ list
// 200 (with the bodies), its API redrive 200 and the console's redrive 303.
func TestAPIBinaryAnswersOnlyItsOwnHostNames(t *testing.T) {
	env := apiEnv(t)
	dlqName := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "JUNBAN_ORDERS_DLQ="); ok {
			dlqName = v
		}
	}
	start := func(extra ...string) string {
		health, apiAddr := freeAddr(t), freeAddr(t)
		p := testenv.Start(t, "junban-api", testenv.Binary(t, "junban-api"), append(append([]string{}, env...),
			append([]string{"JUNBAN_HTTP_ADDR=" + health, "JUNBAN_API_ADDR=" + apiAddr}, extra...)...))
		testenv.WaitFor(t, 30*time.Second, "junban-api to be ready", func() bool {
			if p.Exited() {
				t.Fatalf("junban-api exited before it was ready:\n%s", p.Output())
			}
			code, _ := get(t, "http://"+health+"/readyz", "")
			return code == 200
		})
		return apiAddr
	}
	addr := start()
	_, port, _ := net.SplitHostPort(addr)
	base := "http://" + addr
	for _, c := range []struct{ method, path, form string }{
		{"GET", "/v1/dlq/" + dlqName, ""},
		{"POST", "/v1/dlq/" + dlqName + "/redrive", ""},
		{"GET", "/", ""},
		{"POST", "/dlq/" + dlqName + "/redrive", "what=all&confirm=yes"},
	} {
		for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port} {
			if code, body := send(t, c.method, base+c.path, host, c.form); code != http.StatusMisdirectedRequest || !strings.Contains(body, "urn:junban:problem:misdirected") {
				t.Errorf("%s %s with Host %s: %d, want 421 with a problem: %.300s", c.method, c.path, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "127.0.0.1"} {
		if code, body := send(t, "GET", base+"/v1/dlq/"+dlqName, host, ""); code != 200 || !strings.Contains(body, `"messages":[]`) {
			t.Errorf("GET /v1/dlq with Host %s: %d %.300s", host, code, body)
		}
	}
	if code, _ := send(t, "GET", base+"/", "localhost:"+port, ""); code != 200 {
		t.Errorf("the console with Host localhost: %d", code)
	}

	addr = start("JUNBAN_API_ALLOWED_HOSTS=junban.internal, ops.example")
	for host, want := range map[string]int{"junban.internal": 200, "ops.example:8090": 200, "localhost": 421, "evil.example": 421} {
		if code, body := send(t, "GET", "http://"+addr+"/v1/dlq/"+dlqName, host, ""); code != want {
			t.Errorf("configured names: GET /v1/dlq with Host %s: %d, want %d: %.300s", host, code, want, body)
		}
	}
}
