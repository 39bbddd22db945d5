package api

import (
	"crypto/sha256"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/config"
)

func setEnv(t *testing.T, kv ...string) {
	t.Setenv("JUNBAN_STACK_ENV", filepath.Join(t.TempDir(), "absent.env"))
	for i := 0; i < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

var baseEnv = []string{"REDIS_URL", "redis://127.0.0.1:6379/0", "AWS_REGION", "us-east-1", "DATABASE_URL", "postgres://x@127.0.0.1/x"}

func TestConfigDefaults(t *testing.T) {
	setEnv(t, append(baseEnv, "JUNBAN_API_READ_TOKENS", "read-0123456789abcdef, read-fedcba9876543210",
		"JUNBAN_API_ADMIN_TOKENS", "admin-0123456789abcdef")...)
	cfg, err := config.Load[Config]()
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Addr, cfg.MaxBodyBytes, cfg.RequestTimeout, cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.WriteTimeout,
		cfg.IdleTimeout, cfg.MaxCartSKUs, cfg.StuckAge, cfg.PGMaxConns}
	want := []any{AddrDefault, int64(MaxBodyBytesDefault), RequestTimeoutDefault, ReadHeaderTimeoutDefault, ReadTimeoutDefault,
		WriteTimeoutDefault, IdleTimeoutDefault, MaxCartSKUsDefault, StuckAgeDefault, PGMaxConnsDefault}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("defaults %v, want the named constants %v", got, want)
	}
	o := OptionsOf(cfg)
	if len(o.ReadTokens) != 2 || o.ReadTokens[1] != "read-fedcba9876543210" || len(o.AdminTokens) != 1 {
		t.Fatalf("tokens: %d read, %d admin", len(o.ReadTokens), len(o.AdminTokens))
	}
	if s := fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg); strings.Contains(s, "0123456789abcdef") {
		t.Fatalf("configuration prints a token: %s", s)
	}
}

// Every problem at once; a wide address needs a token; no problem quotes a token.
func TestConfigProblems(t *testing.T) {
	t.Run("bounds", func(t *testing.T) {
		setEnv(t, append(baseEnv, "JUNBAN_API_ADDR", "0.0.0.0:8090", "JUNBAN_API_MAX_CART_SKUS", "0",
			"JUNBAN_API_REQUEST_TIMEOUT", "40s", "JUNBAN_API_STUCK_AGE", "0s", "JUNBAN_API_PG_MAX_CONNS", "0",
			"JUNBAN_API_BACKORDER_SCAN_INTERVAL", "0s")...)
		_, err := config.Load[Config]()
		for _, want := range []string{"JUNBAN_API_ADDR", "JUNBAN_API_MAX_CART_SKUS", "JUNBAN_API_WRITE_TIMEOUT", "JUNBAN_API_STUCK_AGE", "JUNBAN_API_PG_MAX_CONNS",
			"JUNBAN_API_BACKORDER_SCAN_INTERVAL"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("problems %v do not name %s", err, want)
			}
		}
	})
	t.Run("tokens", func(t *testing.T) {
		setEnv(t, append(baseEnv, "JUNBAN_API_ADDR", ":8090", "JUNBAN_API_READ_TOKENS", "tooshort-secret,,ok-but-has space in it")...)
		_, err := config.Load[Config]()
		// Three bad tokens, and the wide address has no good one.
		if err == nil || strings.Count(err.Error(), "JUNBAN_API_READ_TOKENS") != 4 || !strings.Contains(err.Error(), "JUNBAN_API_ADDR") || strings.Contains(err.Error(), "tooshort-secret") {
			t.Fatalf("bad tokens: %v", err)
		}
	})
	t.Run("wide with a token", func(t *testing.T) {
		setEnv(t, append(baseEnv, "JUNBAN_API_ADDR", "[::]:8090", "JUNBAN_API_ADMIN_TOKENS", "admin-0123456789abcdef")...)
		if _, err := config.Load[Config](); err != nil {
			t.Fatalf("a wide address with a token: %v", err)
		}
	})
	for host, want := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "127.1.2.3": true, "": false, "0.0.0.0": false, "10.0.0.1": false, "example.com": false} {
		if Loopback(host) != want {
			t.Errorf("Loopback(%q) = %v", host, !want)
		}
	}
}

// Tokens are matched whole: a prefix, an extension or another scope's token does not pass.
func TestTokenScopes(t *testing.T) {
	a := newAuthenticator([]string{"read-0123456789abcdef", "read-second-token-123"}, []string{"admin-0123456789abcdef"})
	for header, want := range map[string]Scope{
		"Bearer read-0123456789abcdef":  ScopeRead,
		"bearer read-second-token-123":  ScopeRead,
		"Bearer admin-0123456789abcdef": ScopeAdmin,
		"Bearer read-0123456789abcde":   ScopeNone,
		"Bearer read-0123456789abcdefX": ScopeNone,
		"Bearer ":                       ScopeNone,
		"Basic read-0123456789abcdef":   ScopeNone,
		"read-0123456789abcdef":         ScopeNone,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", header)
		if got, _ := a.scope(r); got != want {
			t.Errorf("%q: scope %d, want %d", header, got, want)
		}
	}
	if len(a.read) != 2 || a.read[0] != sha256.Sum256([]byte("read-0123456789abcdef")) {
		t.Fatal("tokens are kept as digests")
	}
}
