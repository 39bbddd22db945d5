package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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

// The sign-in page sends the browser back only to a path of this site: a tab or a
// newline (which browsers drop from a URL), a backslash (which they read as a slash) or a
// second slash would make the rest a host. (Failed against the old safeNext, which let
// "/\t/evil.example" through.)
func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/orders/LC-1?x=1": "/orders/LC-1?x=1", "": "/", "https://evil.example/": "/",
		"//evil.example/": "/", "/\\evil.example": "/", "orders": "/", "/dlq/q-dlq": "/dlq/q-dlq",
		"/\t/evil.example": "/", "/\n/evil.example": "/", "/\r//evil.example": "/", "\t//evil.example": "/",
		" //evil.example": "/", "/x\x00": "/", "/x\x7f": "/", "/%09/evil.example": "/", "/%2e%2e//evil": "/", "/%2F%2Fevil": "/",
		"http:/evil.example": "/", "/ok#frag": "/ok#frag", "/a/../..//evil.example": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever next is, the browser lands on this site: the answer is "/" or a path that,
// read as a browser reads a URL (tabs and newlines dropped, a backslash a slash), and
// cleaned as http.Redirect cleans it, resolves to the console's own host.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/orders/LC-1?x=1", "", "//evil.example", "/\\evil", "/\t/evil.example", "/%09/evil",
		"https://evil.example", "/./", "/..//evil", "\x00", "/\u2028//x", "/%2F%2Fevil", "/a?next=//evil", "/#//evil"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://console.example/login")
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got == "/" {
			return
		}
		if got != next {
			t.Fatalf("safeNext(%q) = %q: neither the input nor /", next, got)
		}
		browser := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(got)
		for _, s := range []string{browser, cleaned(browser)} {
			u, err := base.Parse(s)
			if err != nil || u.Host != base.Host || u.Scheme != base.Scheme {
				t.Fatalf("safeNext(%q) = %q, which a browser reads as %q: host %q (%v)", next, got, s, u.Host, err)
			}
		}
	})
}

// cleaned is the path http.Redirect sends for a local target.
func cleaned(s string) string {
	rec := httptest.NewRecorder()
	http.Redirect(rec, httptest.NewRequest("POST", "http://console.example/login", nil), s, http.StatusSeeOther)
	return rec.Header().Get("Location")
}

// A console POST passes only from the console's own pages: the browser says so with
// Sec-Fetch-Site: same-origin (or none: typed by the user) or an Origin of this host. A
// POST from another site, from an opaque origin (Origin: null) or one that says nothing
// of where it comes from is refused, unless it carries its token in an Authorization
// header, which no other site can make a browser send. GETs pass. (Failed against the
// old hand-written check, which let Origin: null and a POST without either header
// through.)
func TestCheckOrigin(t *testing.T) {
	for _, c := range []struct {
		method, origin, site, auth string
		ok                         bool
	}{
		{"POST", "http://console.test", "same-origin", "", true},
		{"POST", "http://console.test", "", "", true},
		{"POST", "", "same-origin", "", true},
		{"POST", "", "none", "", true},
		{"POST", "", "", "Bearer admin-token-0123456789", true},
		{"GET", "", "", "", true},
		{"GET", "https://elsewhere.test", "cross-site", "", true},
		{"HEAD", "null", "cross-site", "", true},
		{"POST", "", "", "", false},
		{"POST", "null", "", "", false},
		{"POST", "null", "same-origin", "", false},
		{"POST", "null", "none", "", false},
		{"POST", "http://elsewhere.test", "", "", false},
		{"POST", "http://console.test.elsewhere.test", "", "", false},
		{"POST", "https://console.test:8443", "", "", false},
		{"POST", "", "cross-site", "", false},
		{"POST", "", "same-site", "", false},
		{"POST", "http://console.test", "cross-site", "", false},
		{"PUT", "", "", "", false},
		{"DELETE", "http://elsewhere.test", "", "", false},
		{"POST", "", "", "Basic YWRtaW46YWRtaW4=", false},
		{"POST", "null", "", "Bearer admin-token-0123456789", false},
	} {
		r := httptest.NewRequest(c.method, "http://console.test/dlq/x/redrive", nil)
		for k, v := range map[string]string{"Origin": c.origin, "Sec-Fetch-Site": c.site, "Authorization": c.auth} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		if err := checkOrigin(r); (err == nil) != c.ok {
			t.Errorf("%s with Origin %q, Sec-Fetch-Site %q, Authorization %q: error %v, want ok=%v", c.method, c.origin, c.site, c.auth, err, c.ok)
		}
	}
}
