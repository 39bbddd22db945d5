package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/junban/junban/internal/ledger/backorders"
	"github.com/junban/junban/internal/platform/config"
)

// Defaults of the API's settings; Config.SetDefaults gives them to the
// binary's variables (and --env-vars prints them).
const (
	// AddrDefault serves the API on loopback only: a wider address needs tokens.
	AddrDefault = "127.0.0.1:8090"
	// MaxBodyBytesDefault bounds a request body (the cart); larger ones get 413.
	MaxBodyBytesDefault = 1 << 20
	// RequestTimeoutDefault bounds the work of one request (Redis, PostgreSQL, SQS).
	RequestTimeoutDefault = 10 * time.Second
	// ReadHeaderTimeoutDefault bounds reading a request's headers.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// ReadTimeoutDefault bounds reading a whole request, body included.
	ReadTimeoutDefault = 15 * time.Second
	// WriteTimeoutDefault bounds a request from the end of its headers to the end of the
	// answer; above RequestTimeoutDefault so that a timed-out request still gets its 503.
	WriteTimeoutDefault = 30 * time.Second
	// IdleTimeoutDefault closes keep-alive connections idle that long.
	IdleTimeoutDefault = 120 * time.Second
	// MaxCartSKUsDefault bounds the SKUs of one POST /v1/availability.
	MaxCartSKUsDefault = 100
	// StuckAgeDefault: a turn whose event in hand waits longer is listed as stuck.
	StuckAgeDefault = 5 * time.Minute
	// PGMaxConnsDefault bounds the API's PostgreSQL connections.
	PGMaxConnsDefault = 4
	// BackorderScanIntervalDefault is the time between two scans of the SKUs' queues for
	// the backorder gauges.
	BackorderScanIntervalDefault = backorders.IntervalDefault
	// MaxCartSKUsLimit is the most JUNBAN_API_MAX_CART_SKUS may allow.
	MaxCartSKUsLimit = 1000
)

// Config is junban-api's configuration, read from the environment with config.Load;
// every problem is reported at once.
type Config struct {
	config.Common
	config.Redis
	config.Postgres
	config.SQS

	// Addr serves the API (/v1, /openapi.json); JUNBAN_HTTP_ADDR serves /healthz, /readyz
	// and /metrics. A non-loopback Addr needs at least one token.
	Addr string `env:"JUNBAN_API_ADDR"`
	// ReadTokens are the bearer tokens of the read scope, comma separated (several during
	// a rotation). Secrets: never logged.
	ReadTokens Tokens `env:"JUNBAN_API_READ_TOKENS"`
	// AdminTokens are the bearer tokens of the admin scope (redrive, skip; reads too).
	AdminTokens Tokens `env:"JUNBAN_API_ADMIN_TOKENS"`
	// AllowedHosts are the names a request's Host may give, comma separated, without
	// ports ("*": any, behind a proxy that checks Host); others get 421. Empty: on a
	// loopback Addr, localhost, 127.0.0.1, ::1 and Addr's own address; on a wider Addr,
	// any (tokens are required there).
	AllowedHosts string `env:"JUNBAN_API_ALLOWED_HOSTS"`
	// MaxBodyBytes bounds a request body; larger ones get 413.
	MaxBodyBytes int64 `env:"JUNBAN_API_MAX_BODY_BYTES"`
	// RequestTimeout bounds the work of one request; a request past it gets 503.
	RequestTimeout time.Duration `env:"JUNBAN_API_REQUEST_TIMEOUT"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration `env:"JUNBAN_API_READ_HEADER_TIMEOUT"`
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration `env:"JUNBAN_API_READ_TIMEOUT"`
	// WriteTimeout bounds a request from the end of its headers to the end of the answer.
	WriteTimeout time.Duration `env:"JUNBAN_API_WRITE_TIMEOUT"`
	// IdleTimeout closes keep-alive connections idle that long.
	IdleTimeout time.Duration `env:"JUNBAN_API_IDLE_TIMEOUT"`
	// MaxCartSKUs bounds the items of one POST /v1/availability.
	MaxCartSKUs int `env:"JUNBAN_API_MAX_CART_SKUS"`
	// StuckAge: GET /v1/turns/stuck lists a turn whose event in hand (or oldest backlog
	// entry) is older, besides every turn whose event has failed runs.
	StuckAge time.Duration `env:"JUNBAN_API_STUCK_AGE"`
	// PGMaxConns bounds the PostgreSQL connections.
	PGMaxConns int `env:"JUNBAN_API_PG_MAX_CONNS"`
	// BackorderScanInterval is the time between two scans of every SKU's queue of waiting
	// lines, which set junban_backorder_lines and junban_backorder_oldest_wait_seconds.
	BackorderScanInterval time.Duration `env:"JUNBAN_API_BACKORDER_SCAN_INTERVAL"`
	// TraceURL is the address of a trace in the shop's trace viewer (Jaeger, Tempo, ...),
	// with {trace_id} where the trace id goes; empty: the timeline shows trace ids without
	// a link.
	TraceURL string `env:"JUNBAN_TRACE_URL"`
}

// SetDefaults gives the settings their named defaults (config.Load calls it).
func (c *Config) SetDefaults() {
	c.Addr = AddrDefault
	c.MaxBodyBytes = MaxBodyBytesDefault
	c.RequestTimeout = RequestTimeoutDefault
	c.ReadHeaderTimeout = ReadHeaderTimeoutDefault
	c.ReadTimeout = ReadTimeoutDefault
	c.WriteTimeout = WriteTimeoutDefault
	c.IdleTimeout = IdleTimeoutDefault
	c.MaxCartSKUs = MaxCartSKUsDefault
	c.StuckAge = StuckAgeDefault
	c.PGMaxConns = PGMaxConnsDefault
	c.BackorderScanInterval = BackorderScanIntervalDefault
}

// Validate checks what the parser cannot, every problem at once.
func (c Config) Validate() error {
	p := []error{c.Common.Validate(), c.Redis.Validate(), CheckTraceURL(c.TraceURL)}
	read, errs := ParseTokens(string(c.ReadTokens))
	for _, e := range errs {
		p = append(p, errors.New("JUNBAN_API_READ_TOKENS: "+e))
	}
	admin, errs := ParseTokens(string(c.AdminTokens))
	for _, e := range errs {
		p = append(p, errors.New("JUNBAN_API_ADMIN_TOKENS: "+e))
	}
	if strings.TrimSpace(c.AllowedHosts) != "" {
		_, errs := parseHosts(c.AllowedHosts)
		for _, e := range errs {
			p = append(p, errors.New("JUNBAN_API_ALLOWED_HOSTS: "+e))
		}
	}
	if host, _, err := net.SplitHostPort(c.Addr); err != nil {
		p = append(p, fmt.Errorf("JUNBAN_API_ADDR: %q is not host:port", c.Addr))
	} else if !Loopback(host) && len(read)+len(admin) == 0 {
		// Stock, orders and the DLQ's bodies would be open to anyone who reaches it.
		p = append(p, fmt.Errorf("JUNBAN_API_ADDR: %q is not a loopback address: set a valid token in JUNBAN_API_READ_TOKENS or JUNBAN_API_ADMIN_TOKENS", c.Addr))
	}
	if c.MaxBodyBytes <= 0 {
		p = append(p, errors.New("JUNBAN_API_MAX_BODY_BYTES: must be positive"))
	}
	if c.RequestTimeout <= 0 {
		p = append(p, errors.New("JUNBAN_API_REQUEST_TIMEOUT: must be positive"))
	} else if c.WriteTimeout <= c.RequestTimeout {
		p = append(p, fmt.Errorf("JUNBAN_API_WRITE_TIMEOUT: %v must exceed JUNBAN_API_REQUEST_TIMEOUT (%v)", c.WriteTimeout, c.RequestTimeout))
	}
	for name, d := range map[string]time.Duration{
		"JUNBAN_API_READ_HEADER_TIMEOUT":     c.ReadHeaderTimeout,
		"JUNBAN_API_READ_TIMEOUT":            c.ReadTimeout,
		"JUNBAN_API_IDLE_TIMEOUT":            c.IdleTimeout,
		"JUNBAN_API_STUCK_AGE":               c.StuckAge,
		"JUNBAN_API_BACKORDER_SCAN_INTERVAL": c.BackorderScanInterval,
	} {
		if d <= 0 {
			p = append(p, errors.New(name+": must be positive"))
		}
	}
	if c.MaxCartSKUs < 1 || c.MaxCartSKUs > MaxCartSKUsLimit {
		p = append(p, fmt.Errorf("JUNBAN_API_MAX_CART_SKUS: %d is not within 1..%d", c.MaxCartSKUs, MaxCartSKUsLimit))
	}
	if c.PGMaxConns < 1 {
		p = append(p, errors.New("JUNBAN_API_PG_MAX_CONNS: must be at least 1"))
	}
	return errors.Join(p...)
}

// Hosts returns the names the API answers (JUNBAN_API_ALLOWED_HOSTS, or its default for
// Addr); call it on a validated Config.
func (c Config) Hosts() Hosts {
	if strings.TrimSpace(c.AllowedHosts) != "" {
		h, _ := ParseHosts(c.AllowedHosts)
		return h
	}
	if host, _, err := net.SplitHostPort(c.Addr); err == nil && Loopback(host) {
		return LoopbackHosts(host)
	}
	// A wider address has tokens (Validate), which a rebinding page cannot send.
	return AnyHost()
}

// Loopback reports whether host (of host:port) only reaches this machine.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server returns the HTTP server of the API on c.Addr with c's timeouts.
func (c Config) Server(h http.Handler) *http.Server {
	return &http.Server{
		Addr:              c.Addr,
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// Tokens is a comma-separated list of bearer tokens that never prints: fmt, zap and
// JSON show it redacted.
type Tokens string

func (Tokens) String() string               { return "[redacted]" }
func (Tokens) GoString() string             { return "[redacted]" }
func (Tokens) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// MinTokenLen is the shortest token accepted: shorter ones are guessable.
const MinTokenLen = 16

// ParseTokens splits a token list; the problems never quote a token.
func ParseTokens(s string) ([]string, []string) {
	var out, problems []string
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for i, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		switch {
		case t == "":
			problems = append(problems, fmt.Sprintf("token %d is empty", i+1))
		case len(t) < MinTokenLen:
			problems = append(problems, fmt.Sprintf("token %d is shorter than %d characters", i+1, MinTokenLen))
		case strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' }):
			problems = append(problems, fmt.Sprintf("token %d holds a character outside printable ASCII", i+1))
		default:
			out = append(out, t)
		}
	}
	return out, problems
}

// CheckTraceURL checks a JUNBAN_TRACE_URL template: empty, or an http(s) URL with
// {trace_id} in it.
func CheckTraceURL(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, traceIDPlaceholder, "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("JUNBAN_TRACE_URL: %.200q is not an http(s) URL", tmpl)
	}
	if !strings.Contains(tmpl, traceIDPlaceholder) {
		return fmt.Errorf("JUNBAN_TRACE_URL: %.200q has no %s", tmpl, traceIDPlaceholder)
	}
	return nil
}

// traceIDPlaceholder is where a trace's id goes in JUNBAN_TRACE_URL.
const traceIDPlaceholder = "{trace_id}"

// TraceLink is the address of the trace traceID in the viewer tmpl names ("" when either
// is empty).
func TraceLink(tmpl, traceID string) string {
	if tmpl == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(tmpl, traceIDPlaceholder, url.PathEscape(traceID))
}
