package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the webhook-gateway once per test run.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a built webhook-gateway; not in -short")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "webhook-gateway-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "webhook-gateway")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// minimalEnv is an environment without any junban setting: PATH only, and a stack file
// that does not exist so that .junban/stack.env is not read either.
func minimalEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "JUNBAN_STACK_ENV=" + filepath.Join(t.TempDir(), "absent.env")}
}

func runToExit(t *testing.T, env []string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary(t))
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok { //nolint:errorlint // cmd.Run returns it unwrapped
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stderr.String(), code
}

func TestEmptyEnvironmentNamesEveryRequiredVariable(t *testing.T) {
	out, code := runToExit(t, minimalEnv(t))
	if code == 0 {
		t.Fatalf("exit code 0 with an empty environment; stderr:\n%s", out)
	}
	for _, v := range []string{"REDIS_URL", "AWS_REGION", "JUNBAN_WEBHOOK_PROVIDERS"} {
		if !strings.Contains(out, v) {
			t.Errorf("stderr does not name %s:\n%s", v, out)
		}
	}
}

func TestInvalidSettingsReportedAtOnce(t *testing.T) {
	secret := "whsec_this_is_a_long_enough_secret"
	env := append(minimalEnv(t),
		"REDIS_URL=redis://127.0.0.1:1/0", "AWS_REGION=us-east-1",
		"JUNBAN_WEBHOOK_PROVIDERS=stripe:stripe:"+secret+",acme:standard:whsec_!!!,x:paypal:"+secret,
		"JUNBAN_WEBHOOK_LOCK_TTL=5s",
		"JUNBAN_WEBHOOK_MAX_BODY_BYTES=0",
		"JUNBAN_LOG_FORMAT=xml",
		"JUNBAN_LOG_LEVEL=loud",
		"JUNBAN_WEBHOOK_ADMIN_ADDR=9090",
	)
	out, code := runToExit(t, env)
	if code == 0 {
		t.Fatalf("exit code 0; stderr:\n%s", out)
	}
	for _, want := range []string{`"acme"`, `"paypal"`, "JUNBAN_WEBHOOK_LOCK_TTL", "JUNBAN_WEBHOOK_MAX_BODY_BYTES", "JUNBAN_LOG_FORMAT", "JUNBAN_LOG_LEVEL", "JUNBAN_WEBHOOK_ADMIN_ADDR"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr does not mention %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) || strings.Contains(out, "!!!") {
		t.Errorf("stderr shows a secret:\n%s", out)
	}
}

// gatewayProc is a running webhook-gateway binary on the real stack.
type gatewayProc struct {
	cmd    *exec.Cmd
	secret string
	lines  chan map[string]any
	mu     sync.Mutex
	logged bytes.Buffer
	// addr is the public listener; adminAddr the admin one, if any.
	addr, adminAddr string
}

// startGateway runs the binary with a stripe provider and env on top of the stack's
// settings, and waits until it logs its addresses.
func startGateway(t *testing.T, env ...string) *gatewayProc {
	t.Helper()
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	_, prefix := testenv.Redis(t)
	g := &gatewayProc{secret: "whsec_binary_test_secret_0123456789", lines: make(chan map[string]any, 100)}
	full := append(minimalEnv(t), testenv.Env(t)...)
	full = append(full,
		"JUNBAN_ORDERS_QUEUE="+q.OrdersName,
		"JUNBAN_KEY_PREFIX="+prefix,
		"JUNBAN_HTTP_ADDR=127.0.0.1:0",
		"JUNBAN_SHUTDOWN_BUDGET=10s",
		"JUNBAN_WEBHOOK_PROVIDERS=stripe:stripe:"+g.secret,
	)
	g.cmd = exec.Command(binary(t))
	g.cmd.Env = append(full, env...)
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			g.mu.Lock()
			g.logged.WriteString(sc.Text() + "\n")
			g.mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				g.lines <- m
			}
		}
		close(g.lines)
	}()
	timeout := time.After(60 * time.Second)
	for g.addr == "" {
		select {
		case m, ok := <-g.lines:
			if !ok {
				t.Fatalf("gateway ended before listening:\n%s", g.log())
			}
			if m["msg"] == "webhook-gateway listening" {
				g.addr, _ = m["addr"].(string)
				g.adminAddr, _ = m["admin_addr"].(string)
			}
		case <-timeout:
			t.Fatal("gateway did not start listening")
		}
	}
	return g
}

func (g *gatewayProc) log() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logged.String()
}

// short is the start of a body, for an error message.
func short(b string) string {
	if len(b) > 200 {
		return b[:200] + "..."
	}
	return b
}

// deliver posts one signed payment webhook to base and answers the status and body.
func (g *gatewayProc) deliver(t *testing.T, base, id string) (int, string) {
	t.Helper()
	p, err := webhook.NewProvider("stripe", webhook.KindStripe, g.secret)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := webhook.Encode(webhook.KindStripe, webhook.ProviderEvent{ID: id, Type: "payment_intent.succeeded", LCID: "LC-9", OccurredAt: time.Now()})
	h, _ := p.Sign("", time.Now(), body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop sends SIGTERM and expects an orderly exit 0 that never logged the secret.
func (g *gatewayProc) stop(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		for range g.lines {
		}
		exited <- g.cmd.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, g.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30s of SIGTERM:\n%s", g.log())
	}
	if !strings.Contains(g.log(), "webhook-gateway stopped") {
		t.Errorf("no orderly stop logged:\n%s", g.log())
	}
	if strings.Contains(g.log(), g.secret) {
		t.Errorf("the secret was logged")
	}
}

// The built binary against the real stack, JUNBAN_WEBHOOK_ADMIN_ADDR unset: the public
// listener serves the webhooks and a /healthz that touches nothing, never /readyz (each
// of which calls Redis and SQS) nor /metrics; those are on an admin listener that
// defaults to a free port on the loopback interface. Then SIGTERM.
//
// Failed against the code before the change: with the variable unset there was no admin
// listener, and the public one answered GET /readyz and /metrics with 200.
func TestGatewayBinary(t *testing.T) {
	g := startGateway(t)
	public := "http://" + g.addr
	if code, b := testenv.Get(t, public+"/healthz"); code != 200 {
		t.Errorf("public listener: GET /healthz: %d %s, want 200", code, short(b))
	}
	for _, path := range []string{"/readyz", "/metrics"} {
		if code, b := testenv.Get(t, public+path); code != http.StatusNotFound {
			t.Errorf("public listener: GET %s: %d %s, want 404", path, code, short(b))
		}
	}
	host, _, err := net.SplitHostPort(g.adminAddr)
	if err != nil || !net.ParseIP(host).IsLoopback() || g.adminAddr == g.addr {
		t.Fatalf("admin listener %q (public %q), want its own port on the loopback interface:\n%s", g.adminAddr, g.addr, g.log())
	}
	admin := "http://" + g.adminAddr
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, b := testenv.Get(t, admin+path); code != 200 {
			t.Fatalf("admin listener: GET %s: %d %s", path, code, b)
		}
	}
	if code, b := g.deliver(t, public, "evt_bin"); code != 200 || !strings.Contains(b, webhook.OrderEventID("stripe", "evt_bin")) {
		t.Fatalf("webhook: %d %s", code, b)
	}
	if _, b := testenv.Get(t, admin+"/metrics"); !strings.Contains(b, `junban_webhook_requests_total{code="200",provider="stripe"} 1`) {
		t.Errorf("/metrics lacks the request counter:\n%s", b)
	}
	g.stop(t)
}

// With JUNBAN_WEBHOOK_ADMIN_ADDR set, the public listener serves the webhooks and /healthz
// alone (404 for /readyz and /metrics), the admin listener serves the probes and metrics
// alone, and SIGTERM stops both.
//
// Failed against the code before the change: the binary ignored the variable, and the
// public listener answered GET /healthz with 200 instead of 404.
func TestGatewayBinaryAdminListener(t *testing.T) {
	g := startGateway(t, "JUNBAN_WEBHOOK_ADMIN_ADDR=127.0.0.1:0")
	public := "http://" + g.addr
	for _, path := range []string{"/readyz", "/metrics"} {
		if code, b := testenv.Get(t, public+path); code != http.StatusNotFound {
			t.Errorf("public listener: GET %s: %d %s, want 404", path, code, short(b))
		}
	}
	if g.adminAddr == "" || g.adminAddr == g.addr {
		t.Fatalf("admin listener %q (public %q) not logged:\n%s", g.adminAddr, g.addr, g.log())
	}
	admin := "http://" + g.adminAddr
	if code, b := g.deliver(t, public, "evt_public"); code != 200 || !strings.Contains(b, webhook.OrderEventID("stripe", "evt_public")) {
		t.Fatalf("webhook on the public listener: %d %s", code, b)
	}
	if code, b := g.deliver(t, admin, "evt_admin"); code != http.StatusNotFound {
		t.Errorf("webhook on the admin listener: %d %s, want 404", code, b)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		code, b := testenv.Get(t, admin+path)
		if code != 200 {
			t.Errorf("admin listener: GET %s: %d %s, want 200", path, code, short(b))
		}
		if path == "/metrics" && !strings.Contains(b, `junban_webhook_requests_total{code="200",provider="stripe"} 1`) {
			t.Errorf("admin /metrics lacks the public listener's request:\n%s", b)
		}
	}
	g.stop(t)
}
