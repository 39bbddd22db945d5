package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/webhook"
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
	if ee, ok := err.(*exec.ExitError); ok {
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
	)
	out, code := runToExit(t, env)
	if code == 0 {
		t.Fatalf("exit code 0; stderr:\n%s", out)
	}
	for _, want := range []string{`"acme"`, `"paypal"`, "JUNBAN_WEBHOOK_LOCK_TTL", "JUNBAN_WEBHOOK_MAX_BODY_BYTES", "JUNBAN_LOG_FORMAT", "JUNBAN_LOG_LEVEL"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr does not mention %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) || strings.Contains(out, "!!!") {
		t.Errorf("stderr shows a secret:\n%s", out)
	}
}

// The built binary against the real stack: probes, one signed webhook, SIGTERM.
func TestGatewayBinary(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 30)
	_, prefix := testenv.Redis(t)
	secret := "whsec_binary_test_secret_0123456789"
	env := append(minimalEnv(t), testenv.Env(t)...)
	env = append(env,
		"JUNBAN_ORDERS_QUEUE="+q.OrdersName,
		"JUNBAN_KEY_PREFIX="+prefix,
		"JUNBAN_HTTP_ADDR=127.0.0.1:0",
		"JUNBAN_SHUTDOWN_BUDGET=10s",
		"JUNBAN_WEBHOOK_PROVIDERS=stripe:stripe:"+secret,
	)
	cmd := exec.Command(binary(t))
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })

	lines := make(chan map[string]any, 100)
	var logged bytes.Buffer
	var mu sync.Mutex
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logged.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	var addr string
	timeout := time.After(60 * time.Second)
	for addr == "" {
		select {
		case m, ok := <-lines:
			if !ok {
				mu.Lock()
				t.Fatalf("gateway ended before listening:\n%s", logged.String())
			}
			if m["msg"] == "webhook-gateway listening" {
				addr, _ = m["addr"].(string)
			}
		case <-timeout:
			t.Fatal("gateway did not start listening")
		}
	}
	base := "http://" + addr
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}

	p, err := webhook.NewProvider("stripe", webhook.KindStripe, secret)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := webhook.Encode(webhook.KindStripe, webhook.ProviderEvent{ID: "evt_bin", Type: "payment_intent.succeeded", LCID: "LC-9", OccurredAt: time.Now()})
	h, _ := p.Sign("", time.Now(), body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/stripe", bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), webhook.OrderEventID("stripe", "evt_bin")) {
		t.Fatalf("webhook: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `junban_webhook_requests_total{code="200",provider="stripe"} 1`) {
		t.Errorf("/metrics lacks the request counter:\n%s", b)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		mu.Lock()
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logged.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "webhook-gateway stopped") {
		t.Errorf("no orderly stop logged:\n%s", logged.String())
	}
	if strings.Contains(logged.String(), secret) {
		t.Errorf("the secret was logged")
	}
}
