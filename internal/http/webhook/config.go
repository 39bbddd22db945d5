package webhook

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/idempotency"
)

// Defaults of the gateway's settings; Config.SetDefaults gives them to the
// binary's variables (and --env-vars prints them).
const (
	// MaxBodyBytesDefault bounds a webhook's body; larger ones get 413.
	MaxBodyBytesDefault = 1 << 20
	// ToleranceDefault is how far a signature's timestamp may be from the clock, either way.
	ToleranceDefault = 5 * time.Minute
	// LockTTLDefault is the in-progress lock's lifetime, above PublishTimeoutDefault.
	LockTTLDefault = idempotency.LockTTLDefault
	// RetentionDefault keeps completed records for the providers' whole retry window.
	RetentionDefault = idempotency.RetentionDefault
	// PublishTimeoutDefault bounds sending one order event to SQS (the SDK's retries included).
	PublishTimeoutDefault = 10 * time.Second
	// ReadHeaderTimeoutDefault bounds reading a request's headers.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// ReadTimeoutDefault bounds reading a whole request, body included.
	ReadTimeoutDefault = 15 * time.Second
	// BodyReadTimeoutDefault bounds reading a webhook's body once its headers are in:
	// providers send a few KB from data centres, and a slow client is cut off here.
	BodyReadTimeoutDefault = 5 * time.Second
	// WriteTimeoutDefault bounds a request from the end of its headers to the end of the
	// answer; it covers the Redis round trips and the SQS send.
	WriteTimeoutDefault = 30 * time.Second
	// IdleTimeoutDefault closes keep-alive connections idle that long.
	IdleTimeoutDefault = 120 * time.Second
	// MaxInFlightDefault bounds the signed deliveries in their Redis and SQS work at once.
	MaxInFlightDefault = 64
	// AdminAddrDefault keeps /readyz and /metrics on the loopback interface, on a free
	// port (logged as admin_addr), until a deployment names one its probes can reach.
	AdminAddrDefault = "127.0.0.1:0"
)

// Config is the webhook gateway's configuration, read from the environment with
// config.Load; every problem is reported at once.
type Config struct {
	config.Common
	config.Redis
	config.SQS

	// Providers lists the providers the gateway accepts, comma separated, each
	// name:kind:secret[|secret...] (kind stripe or standard; several secrets during a
	// rotation). It holds the signing secrets: never log it.
	Providers Secret `env:"JUNBAN_WEBHOOK_PROVIDERS,required,notEmpty"`
	// MaxBodyBytes bounds a webhook's body; larger ones get 413.
	MaxBodyBytes int64 `env:"JUNBAN_WEBHOOK_MAX_BODY_BYTES"`
	// Tolerance is how far a signature's timestamp may be from the clock, either way.
	Tolerance time.Duration `env:"JUNBAN_WEBHOOK_TOLERANCE"`
	// LockTTL is the in-progress lock's lifetime: how long a concurrent duplicate gets 409
	// and how long a crashed gateway blocks a provider event before another takes over.
	LockTTL time.Duration `env:"JUNBAN_WEBHOOK_LOCK_TTL"`
	// Retention keeps completed records (a late retry gets the first answer); it must
	// exceed twice Tolerance, or a replay outlives its record.
	Retention time.Duration `env:"JUNBAN_WEBHOOK_RETENTION"`
	// PublishTimeout bounds sending one order event to SQS; it must stay under LockTTL.
	PublishTimeout time.Duration `env:"JUNBAN_WEBHOOK_PUBLISH_TIMEOUT"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration `env:"JUNBAN_WEBHOOK_READ_HEADER_TIMEOUT"`
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration `env:"JUNBAN_WEBHOOK_READ_TIMEOUT"`
	// BodyReadTimeout bounds reading a webhook's body once its headers are in; a body not
	// in by then gets 408. At most ReadTimeout.
	BodyReadTimeout time.Duration `env:"JUNBAN_WEBHOOK_BODY_READ_TIMEOUT"`
	// WriteTimeout bounds a request from the end of its headers to the end of the answer.
	WriteTimeout time.Duration `env:"JUNBAN_WEBHOOK_WRITE_TIMEOUT"`
	// IdleTimeout closes keep-alive connections idle that long.
	IdleTimeout time.Duration `env:"JUNBAN_WEBHOOK_IDLE_TIMEOUT"`
	// MaxInFlight bounds the signed, valid deliveries in their Redis and SQS work at once;
	// beyond it a delivery gets 503 with Retry-After. Bodies are read before, outside it.
	MaxInFlight int `env:"JUNBAN_WEBHOOK_MAX_IN_FLIGHT"`
	// AdminAddr serves /healthz, /readyz and /metrics; HTTPAddr serves the webhooks and a
	// /healthz alone, so the internet-facing listener shows no internals and cannot make
	// the gateway call Redis or SQS without a signed delivery.
	AdminAddr string `env:"JUNBAN_WEBHOOK_ADMIN_ADDR"`
}

// HealthAddr is the admin listener's address: the public one serves no /readyz.
func (c Config) HealthAddr() string { return c.AdminAddr }

// SetDefaults gives the settings their named defaults (config.Load calls it).
func (c *Config) SetDefaults() {
	c.MaxBodyBytes = MaxBodyBytesDefault
	c.Tolerance = ToleranceDefault
	c.LockTTL = LockTTLDefault
	c.Retention = RetentionDefault
	c.PublishTimeout = PublishTimeoutDefault
	c.ReadHeaderTimeout = ReadHeaderTimeoutDefault
	c.ReadTimeout = ReadTimeoutDefault
	c.BodyReadTimeout = BodyReadTimeoutDefault
	c.WriteTimeout = WriteTimeoutDefault
	c.IdleTimeout = IdleTimeoutDefault
	c.MaxInFlight = MaxInFlightDefault
	c.AdminAddr = AdminAddrDefault
}

// Validate checks what the parser cannot, every problem at once.
func (c Config) Validate() error {
	p := []error{c.Common.Validate(), c.Redis.Validate()}
	if c.Providers != "" {
		_, errs := parseProviders(string(c.Providers))
		for _, e := range errs {
			p = append(p, errors.New(e))
		}
	}
	if c.MaxBodyBytes <= 0 {
		p = append(p, errors.New("JUNBAN_WEBHOOK_MAX_BODY_BYTES: must be positive"))
	}
	if c.Tolerance <= 0 {
		p = append(p, errors.New("JUNBAN_WEBHOOK_TOLERANCE: must be positive"))
	}
	if c.MaxInFlight < 1 {
		p = append(p, errors.New("JUNBAN_WEBHOOK_MAX_IN_FLIGHT: must be at least 1"))
	}
	if c.Retention < time.Millisecond {
		p = append(p, errors.New("JUNBAN_WEBHOOK_RETENTION: must be at least 1ms"))
	} else if c.Tolerance > 0 && c.Retention-c.Tolerance <= c.Tolerance {
		// A signed delivery verifies for up to twice the tolerance (the timestamp may be
		// ahead of the clock or behind it); a record that expires sooner lets a captured
		// delivery be replayed and published again.
		p = append(p, fmt.Errorf("JUNBAN_WEBHOOK_RETENTION: %v must exceed twice JUNBAN_WEBHOOK_TOLERANCE (%v)", c.Retention, c.Tolerance))
	}
	if c.PublishTimeout <= 0 {
		p = append(p, errors.New("JUNBAN_WEBHOOK_PUBLISH_TIMEOUT: must be positive"))
	}
	if c.LockTTL <= c.PublishTimeout {
		// A holder still sending when its lock expires would let a duplicate send again.
		p = append(p, fmt.Errorf("JUNBAN_WEBHOOK_LOCK_TTL: %v must exceed JUNBAN_WEBHOOK_PUBLISH_TIMEOUT (%v)", c.LockTTL, c.PublishTimeout))
	}
	if c.WriteTimeout <= c.PublishTimeout {
		p = append(p, fmt.Errorf("JUNBAN_WEBHOOK_WRITE_TIMEOUT: %v must exceed JUNBAN_WEBHOOK_PUBLISH_TIMEOUT (%v)", c.WriteTimeout, c.PublishTimeout))
	}
	if c.BodyReadTimeout <= 0 || (c.ReadTimeout > 0 && c.BodyReadTimeout > c.ReadTimeout) {
		p = append(p, fmt.Errorf("JUNBAN_WEBHOOK_BODY_READ_TIMEOUT: %v must be positive and at most JUNBAN_WEBHOOK_READ_TIMEOUT (%v)", c.BodyReadTimeout, c.ReadTimeout))
	}
	for name, d := range map[string]time.Duration{
		"JUNBAN_WEBHOOK_READ_HEADER_TIMEOUT": c.ReadHeaderTimeout,
		"JUNBAN_WEBHOOK_READ_TIMEOUT":        c.ReadTimeout,
		"JUNBAN_WEBHOOK_IDLE_TIMEOUT":        c.IdleTimeout,
	} {
		if d <= 0 {
			p = append(p, errors.New(name+": must be positive"))
		}
	}
	if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
		p = append(p, fmt.Errorf("JUNBAN_WEBHOOK_ADMIN_ADDR: %q is not host:port", c.AdminAddr))
	}
	return errors.Join(p...)
}

// ProviderList returns the parsed providers; call it after Load succeeded.
func (c Config) ProviderList() ([]Provider, error) { return ParseProviders(string(c.Providers)) }

// ParseProviders parses a JUNBAN_WEBHOOK_PROVIDERS value; the error (a *config.Error)
// lists every problem and never quotes a secret.
func ParseProviders(spec string) ([]Provider, error) {
	ps, errs := parseProviders(spec)
	if len(errs) > 0 {
		return nil, &config.Error{Problems: errs}
	}
	return ps, nil
}

// Secret is a string that never prints: fmt, zap and JSON show it redacted.
type Secret string

func (Secret) String() string               { return "[redacted]" }
func (Secret) GoString() string             { return "[redacted]" }
func (Secret) MarshalText() ([]byte, error) { return []byte("[redacted]"), nil }

// Kind is a provider's dialect: how it signs and what its payload looks like.
type Kind string

// Kinds of providers.
const (
	// KindStripe: one Stripe-Signature header "t=<unix>,v1=<hex>[,v1=<hex>]", HMAC-SHA256
	// of "<t>.<body>" keyed with the whole secret string; the payload is a Stripe event.
	KindStripe Kind = "stripe"
	// KindStandard: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature
	// "v1,<base64>" space separated), HMAC-SHA256 of "<id>.<timestamp>.<body>" keyed with
	// the base64-decoded secret after its "whsec_" prefix; the payload is
	// {"type", "timestamp", "data"} and the event id is webhook-id.
	KindStandard Kind = "standard"
)

// MinKeyBytes is the shortest signing key accepted.
const MinKeyBytes = 16

// Provider is one configured webhook sender.
type Provider struct {
	// Name is the path segment: POST /webhooks/{name}.
	Name string
	// Kind is the signature scheme and payload dialect.
	Kind Kind
	// keys are the HMAC keys, the newest first; any one verifies (rotation).
	keys [][]byte
}

// NewProvider returns a provider of kind with its secrets, as they appear in
// JUNBAN_WEBHOOK_PROVIDERS.
func NewProvider(name string, kind Kind, secrets ...string) (Provider, error) {
	p, errs := parseProvider(name, string(kind), secrets)
	if len(errs) > 0 {
		return Provider{}, &config.Error{Problems: errs}
	}
	return p, nil
}

// String names the provider without its secrets.
func (p Provider) String() string {
	return fmt.Sprintf("%s:%s:(%d secrets)", p.Name, p.Kind, len(p.keys))
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// parseProviders parses JUNBAN_WEBHOOK_PROVIDERS. Problems never quote a secret.
func parseProviders(spec string) ([]Provider, []string) {
	var (
		out  []Provider
		errs []string
		seen = map[string]bool{}
	)
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			errs = append(errs, fmt.Sprintf("JUNBAN_WEBHOOK_PROVIDERS: entry %d is not name:kind:secret[|secret...]", i+1))
			continue
		}
		p, perrs := parseProvider(parts[0], parts[1], strings.Split(parts[2], "|"))
		errs = append(errs, perrs...)
		if seen[p.Name] {
			errs = append(errs, fmt.Sprintf("JUNBAN_WEBHOOK_PROVIDERS: provider %q is listed twice", p.Name))
		}
		seen[p.Name] = true
		if len(perrs) == 0 {
			out = append(out, p)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, "JUNBAN_WEBHOOK_PROVIDERS: no provider")
	}
	return out, errs
}

func parseProvider(name, kind string, secrets []string) (Provider, []string) {
	name, kind = strings.TrimSpace(name), strings.TrimSpace(kind)
	p := Provider{Name: name, Kind: Kind(kind)}
	var errs []string
	bad := func(format string, args ...any) {
		errs = append(errs, "JUNBAN_WEBHOOK_PROVIDERS: "+fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(name) {
		bad("provider name %q is not [a-z0-9][a-z0-9_-]*", name)
	}
	if p.Kind != KindStripe && p.Kind != KindStandard {
		bad("provider %q: kind %q is neither %q nor %q", name, kind, KindStripe, KindStandard)
		return p, errs
	}
	for i, s := range secrets {
		s = strings.TrimSpace(s)
		key, err := p.Kind.key(s)
		if err != nil {
			bad("provider %q: secret %d: %v", name, i+1, err)
			continue
		}
		p.keys = append(p.keys, key)
	}
	return p, errs
}

// key turns a secret as configured into the HMAC key of kind. Errors never quote it.
func (k Kind) key(secret string) ([]byte, error) {
	if secret == "" {
		return nil, fmt.Errorf("empty")
	}
	var key []byte
	switch k {
	case KindStripe:
		key = []byte(secret)
	case KindStandard:
		var err error
		key, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			return nil, fmt.Errorf("not base64 after the whsec_ prefix")
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", k)
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("key of %d bytes, at least %d needed", len(key), MinKeyBytes)
	}
	return key, nil
}
