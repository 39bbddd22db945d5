package webhooksend

import (
	"errors"
	"testing"

	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/platform/cli"
)

// Provider takes kind and secret when both are given, else the gateway's
// JUNBAN_WEBHOOK_PROVIDERS; a provider it cannot find, or a kind that contradicts it, is
// a usage error.
func TestProvider(t *testing.T) {
	t.Setenv("JUNBAN_STACK_ENV", "")
	const secret = "whsec_c3RvcmUtdGVzdC1zZWNyZXQtMTIzNDU2"
	t.Setenv("JUNBAN_WEBHOOK_PROVIDERS", "shop:standard:"+secret)
	if p, err := Provider("shop", "", ""); err != nil || p.Name != "shop" || p.Kind != webhook.KindStandard {
		t.Fatalf("shop from the environment: %+v, %v", p, err)
	}
	if p, err := Provider("other", "stripe", "whsec_b3RoZXItdGVzdC1zZWNyZXQ="); err != nil || p.Kind != webhook.KindStripe {
		t.Fatalf("kind and secret given: %+v, %v", p, err)
	}
	for _, tc := range []struct{ name, kind string }{{"nobody", ""}, {"shop", "stripe"}} {
		if _, err := Provider(tc.name, tc.kind, ""); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%s (kind %q): %v, want a usage error", tc.name, tc.kind, err)
		}
	}
	t.Setenv("JUNBAN_WEBHOOK_PROVIDERS", "")
	if _, err := Provider("shop", "", ""); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("no JUNBAN_WEBHOOK_PROVIDERS: %v, want a usage error", err)
	}
}
