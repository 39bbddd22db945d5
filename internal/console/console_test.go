package console

import (
	"net/http/httptest"
	"testing"
)

func TestReasonCode(t *testing.T) {
	for in, want := range map[string]string{
		"ERR_MAX_ATTEMPTS 12 runs, last: stock service away": "ERR_MAX_ATTEMPTS",
		"ERR_SKIPPED":                       "ERR_SKIPPED",
		"(redrive policy: maxReceiveCount)": "(redrive policy: maxReceiveCount)",
		"unspecified":                       "unspecified",
	} {
		if got := ReasonCode(in); got != want {
			t.Errorf("ReasonCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// The sign-in page sends the browser back only to a path of this site.
func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/orders/LC-1?x=1": "/orders/LC-1?x=1", "": "/", "https://evil.example/": "/",
		"//evil.example/": "/", "/\\evil.example": "/", "orders": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCrossSite(t *testing.T) {
	for _, c := range []struct {
		origin, site string
		want         bool
	}{
		{"", "", false}, {"http://console.test", "same-origin", false}, {"http://elsewhere.test", "", true},
		{"", "cross-site", true}, {"", "same-site", true}, {"null", "none", false},
	} {
		r := httptest.NewRequest("POST", "http://console.test/dlq/x/redrive", nil)
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.site != "" {
			r.Header.Set("Sec-Fetch-Site", c.site)
		}
		if got := crossSite(r); got != c.want {
			t.Errorf("Origin %q, Sec-Fetch-Site %q: crossSite %v, want %v", c.origin, c.site, got, c.want)
		}
	}
}
