package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// HealthcheckTimeoutDefault bounds `<binary> healthcheck`'s request: /readyz checks
// Redis, PostgreSQL and SQS one after another, 2 s each at most.
const HealthcheckTimeoutDefault = 8 * time.Second

const healthcheckUsage = `healthcheck asks the running binary's own /healthz (--ready: /readyz) on its
configured health address (JUNBAN_HTTP_ADDR; the gateway's JUNBAN_WEBHOOK_ADMIN_ADDR) and
exits 0 when it answers 200, 1 otherwise: a container health check that needs no shell or curl.
  --ready          ask /readyz (Redis, PostgreSQL, SQS reachable) instead of /healthz
  --timeout        give up after this long (default 8s)
`

// HealthAddr is the address that serves /healthz and /readyz.
func (c Common) HealthAddr() string { return c.HTTPAddr }

// healthcheck runs `<binary> healthcheck [--ready] [--timeout d]`: it loads the binary's
// configuration from the environment, as the binary did, and asks its health address.
func healthcheck[T any](args []string, usage string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ready := fs.Bool("ready", false, "")
	timeout := fs.Duration("timeout", HealthcheckTimeoutDefault, "")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Print(usage)
		return nil
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("healthcheck takes no arguments, got %q", fs.Args())
	case err == nil && *timeout <= 0:
		err = errors.New("healthcheck: --timeout must be positive")
	}
	if err != nil {
		return &UsageError{Err: err, Usage: usage}
	}
	cfg, err := Load[T]()
	if err != nil {
		return err
	}
	h, ok := any(cfg).(interface{ HealthAddr() string })
	if !ok {
		return fmt.Errorf("healthcheck: %T has no health address", cfg)
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	return AskHealth(ctx, h.HealthAddr(), path)
}

// AskHealth GETs path on the health listener bound to addr and returns nil for a 200. A
// wildcard host (empty, 0.0.0.0, ::) is asked on the loopback interface; port 0 (a port
// picked at start) cannot be asked and is an error.
func AskHealth(ctx context.Context, addr, path string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: health address %q: %w", addr, err)
	}
	if port == "0" {
		return fmt.Errorf("healthcheck: health address %q has port 0 (picked at start): set a fixed port", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Printf("healthy: GET %s: %s\n", url, strings.TrimSpace(string(body)))
	return nil
}
