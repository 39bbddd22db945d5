package console

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/junban/junban/internal/aws/dlq"
)

// The sign-in form, whatever its body: a token it accepts is non-empty printable ASCII
// within maxTokenLen and signs in again the same when sent again; one it refuses gets
// one of the form's errors, which never quote it; the page to go back to is always on
// this site.
func FuzzSignInForm(f *testing.F) {
	for _, s := range []string{"token=admin-token-0123456789&next=%2Forders%2FLC-1",
		"token=+admin-token-0123456789+", "token=", "token=%00abc", "token=t%C3%A9st-token-0123456789", "next=//evil&token=x",
		"token=" + strings.Repeat("a", 600), "token=a%09b", "token=a&token=b", "%zz", "next=/%09/evil.example&token=read-token-0123456789"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return // ParseForm refuses it: the handler answers 401 as for a bad token
		}
		got, err := parseSignIn(form)
		if safeNext(got.Next) != got.Next || !strings.HasPrefix(got.Next, "/") {
			t.Fatalf("next %q is not a path of this site", got.Next)
		}
		if err != nil {
			if !errors.Is(err, errTokenEmpty) && !errors.Is(err, errTokenLong) && !errors.Is(err, errTokenChars) {
				t.Fatalf("unexpected error %v", err)
			}
			if tok := strings.TrimSpace(form.Get("token")); len(tok) > 3 && strings.Contains(err.Error(), tok) {
				t.Fatalf("the error %q quotes the token", err)
			}
			return
		}
		if got.Token == "" || len(got.Token) > maxTokenLen || strings.ContainsFunc(got.Token, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("accepted token %q", got.Token)
		}
		again, err := parseSignIn(url.Values{"token": {got.Token}, "next": {got.Next}})
		if err != nil || again != got {
			t.Fatalf("sent again: %+v, %v; first %+v", again, err, got)
		}
	})
}

// The DLQ forms, whatever their body: an action the form accepts names one message, a
// reason's group or (a redrive only) all, with plain bounded values, and the
// confirmation page's fields, sent back with confirm=yes, give the same action
// confirmed; a refused form gets a clear error.
func FuzzDLQForm(f *testing.F) {
	for _, s := range []string{"what=one&id=8f1c-22", "what=reason&reason=ERR_MAX_ATTEMPTS&confirm=yes", "what=all", "what=all&confirm=yes",
		"what=one", "what=reason&reason=", "what=one&id=a%00b", "what=none", "", "what=one&id=" + strings.Repeat("x", 300),
		"what=reason&reason=(redrive+policy:+maxReceiveCount)", "what=one&id=x&reason=y&confirm=no"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, del bool) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		act := dlq.Move
		if del {
			act = dlq.Delete
		}
		got, err := parseDLQForm(form, act)
		if err != nil {
			if !errors.Is(err, errWhat) && !errors.Is(err, errField) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		switch got.What {
		case "one":
			if !plainField(got.ID) || got.Reason != "" || got.match() == nil {
				t.Fatalf("one: %+v", got)
			}
		case "reason":
			if !plainField(got.Reason) || got.ID != "" || got.match() == nil {
				t.Fatalf("reason: %+v", got)
			}
		case "all":
			if act != dlq.Move || got.match() != nil {
				t.Fatalf("all with action %v: %+v", act, got)
			}
		default:
			t.Fatalf("accepted what %q", got.What)
		}
		if got.Confirmed != (form.Get("confirm") == "yes") {
			t.Fatalf("confirmed %v for confirm %q", got.Confirmed, form.Get("confirm"))
		}
		back := url.Values{"confirm": {"yes"}}
		for k, v := range got.fields() {
			back.Set(k, v)
		}
		again, err := parseDLQForm(back, act)
		want := got
		want.Confirmed = true
		if err != nil || again != want {
			t.Fatalf("the confirmation sent back: %+v, %v; want %+v", again, err, want)
		}
	})
}

// The skip form, whatever its lcid and body: an accepted lcid is plain and bounded,
// confirmed only by confirm=yes; a refused one gets errField.
func FuzzSkipForm(f *testing.F) {
	for _, s := range []string{"LC-1", "", "LC\x00", "LC 1", strings.Repeat("L", 300), "..", "LC/1", "注文-1"} {
		f.Add(s, "confirm=yes")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, lcid, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		got, err := parseSkip(lcid, form)
		if err != nil {
			if !errors.Is(err, errField) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got.LCID != lcid || !plainField(lcid) || got.Confirmed != (form.Get("confirm") == "yes") {
			t.Fatalf("accepted %q, %q as %+v", lcid, body, got)
		}
	})
}

// A session id is what newSessionID makes, and nothing else costs a Redis call.
func FuzzSessionID(f *testing.F) {
	f.Add(newSessionID())
	for _, s := range []string{"", "admin-token-0123456789", strings.Repeat("A", 43), strings.Repeat("=", 43), strings.Repeat("A", 44)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if validSessionID(id) && (len(id) != 43 || strings.ContainsAny(id, "=+/")) {
			t.Fatalf("accepted %q", id)
		}
	})
}

func TestNewSessionIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newSessionID()
		if !validSessionID(id) || seen[id] {
			t.Fatalf("session id %q invalid or seen", id)
		}
		seen[id] = true
	}
}

// The settings: every problem at once, and Secure unless the API is on loopback under
// "auto".
func TestSettings(t *testing.T) {
	var s Settings
	s.SetDefaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:8090": false, "localhost:8090": false, "[::1]:8090": false, "0.0.0.0:8090": true, "10.1.2.3:8090": true, ":8090": true} {
		if got := s.Secure(addr); got != want {
			t.Errorf("auto on %s: Secure %v, want %v", addr, got, want)
		}
	}
	s.SecureCookie = "true"
	if !s.Secure("127.0.0.1:8090") {
		t.Errorf("true on loopback: not Secure")
	}
	s.SecureCookie = "false"
	if s.Secure("0.0.0.0:8090") {
		t.Errorf("false: Secure")
	}
	err := Settings{SecureCookie: "yes"}.Validate()
	for _, name := range []string{"JUNBAN_CONSOLE_SECURE_COOKIE", "JUNBAN_CONSOLE_SESSION_LIFETIME", "JUNBAN_CONSOLE_SESSION_IDLE"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate does not name %s: %v", name, err)
		}
	}
}

// Sign-in failures count per IPv4 address, and per /64 for IPv6.
func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{"192.0.2.1:5000": "192.0.2.1", "[2001:db8::1]:443": "2001:db8::/64",
		"[2001:db8::ffff:1]:1": "2001:db8::/64", "[::ffff:192.0.2.1]:80": "192.0.2.1", "garbage": "unknown"} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
