package webhook

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/platform/config"
)

func setEnv(t *testing.T, kv ...string) {
	t.Setenv("JUNBAN_STACK_ENV", filepath.Join(t.TempDir(), "absent.env"))
	for i := 0; i < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestConfigDefaults(t *testing.T) {
	setEnv(t, "REDIS_URL", "redis://127.0.0.1:6379/0", "AWS_REGION", "us-east-1",
		"JUNBAN_WEBHOOK_PROVIDERS", "stripe:stripe:whsec_0123456789abcdef|whsec_fedcba9876543210, acme:standard:whsec_"+strings.Repeat("QUJD", 8))
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.MaxBodyBytes, cfg.Tolerance, cfg.LockTTL, cfg.Retention, cfg.PublishTimeout,
		cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout, cfg.MaxInFlight}
	want := []any{int64(MaxBodyBytesDefault), ToleranceDefault, LockTTLDefault, RetentionDefault, PublishTimeoutDefault,
		ReadHeaderTimeoutDefault, ReadTimeoutDefault, WriteTimeoutDefault, IdleTimeoutDefault, MaxInFlightDefault}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("defaults %v, want the named constants %v", got, want)
	}
	ps, err := cfg.ProviderList()
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "stripe" || len(ps[0].keys) != 2 || ps[1].Kind != KindStandard || len(ps[1].keys[0]) != 24 {
		t.Fatalf("providers %v", ps)
	}
	if s := fmt.Sprintf("%v %+v", cfg, cfg); strings.Contains(s, "whsec_") {
		t.Fatalf("configuration prints a secret: %s", s)
	}
}

func TestParseProvidersReportsEveryProblem(t *testing.T) {
	_, err := ParseProviders("a:stripe:short, B:stripe:whsec_0123456789abcdef, c:paypal:x, d:standard:whsec_@@@, e:stripe, a:stripe:whsec_0123456789abcdef, f:standard:")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{`"a": secret 1`, `name "B"`, `kind "paypal"`, `"d": secret 1: not base64`, "entry 5", `"a" is listed twice`, `"f": secret 1: empty`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "whsec_0123456789abcdef") || strings.Contains(msg, "short") || strings.Contains(msg, "@@@") {
		t.Errorf("error quotes a secret:\n%s", msg)
	}
	if _, err := ParseProviders(" , "); err == nil {
		t.Error("no provider accepted")
	}
}

// Failed against Validate without the retention check (1m/5m got no problem), and
// against a check of retention > tolerance alone (10m/5m got none).
func TestConfigRetentionExceedsTolerance(t *testing.T) {
	setEnv(t, "REDIS_URL", "redis://127.0.0.1:6379/0", "AWS_REGION", "us-east-1",
		"JUNBAN_WEBHOOK_PROVIDERS", "stripe:stripe:whsec_0123456789abcdef")
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		retention, tolerance time.Duration
		bad                  bool
	}{
		{time.Minute, 5 * time.Minute, true},
		{5 * time.Minute, 5 * time.Minute, true},
		{10 * time.Minute, 5 * time.Minute, true}, // the timestamp may be 5m ahead, then 5m behind
		{11 * time.Minute, 5 * time.Minute, false},
		{72 * time.Hour, 5 * time.Minute, false},
	} {
		cfg.Retention, cfg.Tolerance = tc.retention, tc.tolerance
		p := strings.Join(config.Problems(cfg.Validate()), "\n")
		if got := strings.Contains(p, "JUNBAN_WEBHOOK_RETENTION"); got != tc.bad {
			t.Errorf("retention %v, tolerance %v: problems %q, want a retention problem: %v", tc.retention, tc.tolerance, p, tc.bad)
		}
		if tc.bad && !strings.Contains(p, "JUNBAN_WEBHOOK_TOLERANCE") {
			t.Errorf("problem %q does not name JUNBAN_WEBHOOK_TOLERANCE", p)
		}
		if !tc.bad && p != "" {
			t.Errorf("sane values: problems %q", p)
		}
	}
}
