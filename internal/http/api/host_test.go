package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/config"
)

// Which Host headers each policy lets through: the port never matters, case and a final
// dot neither; a name that merely starts like an allowed one does not pass.
func TestHostsAllow(t *testing.T) {
	loop := LoopbackHosts("127.0.0.2")
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8090": true, "LocalHost.:8090": true, "127.0.0.1": true,
		"127.0.0.1:8090": true, "[::1]:8090": true, "[::1]": true, "127.0.0.2:8090": true,
		"[::ffff:127.0.0.1]:8090": true,
		"":                        false, "evil.example": false, "evil.example:8090": false, "localhost.evil.example": false,
		"127.0.0.1.evil.example": false, "127.0.0.3": false, "0.0.0.0": false, "[::]:8090": false,
	} {
		if got := loop.Allows(host); got != want {
			t.Errorf("loopback: Allows(%q) = %v", host, got)
		}
	}
	named, err := ParseHosts(" junban.internal , OPS.example., 10.0.0.5, [fd00::1]")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"junban.internal": true, "ops.example:443": true, "10.0.0.5:8090": true, "[fd00::1]:8090": true,
		"localhost": false, "x.junban.internal": false, "evil.example": false,
	} {
		if got := named.Allows(host); got != want {
			t.Errorf("configured: Allows(%q) = %v", host, got)
		}
	}
	if s := named.String(); s != "10.0.0.5,fd00::1,junban.internal,ops.example" {
		t.Errorf("String() = %q", s)
	}
	any, err := ParseHosts("*")
	if err != nil || !any.Allows("evil.example") || !any.Allows("") || any.String() != "*" {
		t.Errorf(`"*": %v, %v`, err, any)
	}
	for _, bad := range []string{"a,,b", "junban.internal:8090", "http://junban.internal", "*,junban.internal", "a b", "ev\x00il"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q): no problem", bad)
		}
	}
}

// JUNBAN_API_ALLOWED_HOSTS and its defaults: the loopback names on a loopback address,
// any name on a wider one (which has tokens), the list when one is given; a bad list is
// a configuration problem.
func TestConfigHosts(t *testing.T) {
	for _, c := range []struct {
		env           []string
		allow, refuse string
	}{
		{nil, "localhost:8090", "evil.example"},
		{[]string{"JUNBAN_API_ADDR", "127.0.0.7:8090"}, "127.0.0.7:8090", "evil.example"},
		{[]string{"JUNBAN_API_ADDR", "0.0.0.0:8090", "JUNBAN_API_READ_TOKENS", "read-0123456789abcdef"}, "evil.example", ""},
		{[]string{"JUNBAN_API_ADDR", "0.0.0.0:8090", "JUNBAN_API_READ_TOKENS", "read-0123456789abcdef", "JUNBAN_API_ALLOWED_HOSTS", "junban.internal"}, "junban.internal", "evil.example"},
		{[]string{"JUNBAN_API_ALLOWED_HOSTS", "*"}, "evil.example", ""},
	} {
		setEnv(t, append(append([]string{}, baseEnv...), c.env...)...)
		cfg, err := config.Load[Config]()
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		h := cfg.Hosts()
		if !h.Allows(c.allow) || (c.refuse != "" && h.Allows(c.refuse)) {
			t.Errorf("%v: hosts %s: allows %q %v, %q %v", c.env, h, c.allow, h.Allows(c.allow), c.refuse, h.Allows(c.refuse))
		}
	}
	setEnv(t, append(append([]string{}, baseEnv...), "JUNBAN_API_ALLOWED_HOSTS", "junban.internal:8090,,*")...)
	_, err := config.Load[Config]()
	if err == nil || strings.Count(err.Error(), "JUNBAN_API_ALLOWED_HOSTS") != 3 || !strings.Contains(err.Error(), "no port") || !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "alone") {
		t.Fatalf("a bad list: %v", err)
	}
}

// Without tokens (every request admin), a page that rebinds its own name to 127.0.0.1
// reads the DLQ and redrives it through the bare handler; behind OnlyHosts it gets 421
// for both, while 127.0.0.1 and localhost, with or without the port, and configured
// names pass. (The bare handler's 200s are the broken variant: the API before the check.)
func TestOnlyHostsRefusesRebindingNames(t *testing.T) {
	e := newEnv(t, func(d *Deps, o *Options) { o.ReadTokens, o.AdminTokens = nil, nil })
	guarded := httptest.NewServer(OnlyHosts(LoopbackHosts("127.0.0.1"), e.api))
	t.Cleanup(guarded.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(guarded.URL, "http://"))
	list, redrive := "/v1/dlq/"+e.q.OrdersDLQName, "/v1/dlq/"+e.q.OrdersDLQName+"/redrive"

	for _, path := range []string{list, redrive} {
		method := map[string]string{list: "GET", redrive: "POST"}[path]
		if code, body := e.send(e.srv.URL, "evil.example:"+port, method, path, "", nil); code != 200 {
			t.Fatalf("bare handler, %s %s with Host evil.example: %d %s", method, path, code, body)
		}
		for _, host := range []string{"evil.example", "evil.example:" + port, "localhost.evil.example:" + port} {
			code, body := e.send(guarded.URL, host, method, path, "", nil)
			var p Problem
			decode(t, body, &p)
			if code != http.StatusMisdirectedRequest || p.Type != ProblemMisdirected || !strings.Contains(p.Detail, "JUNBAN_API_ALLOWED_HOSTS") {
				t.Errorf("%s %s with Host %s: %d %s", method, path, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "127.0.0.1", "localhost", "[::1]:" + port} {
		if code, body := e.send(guarded.URL, host, "GET", list, "", nil); code != 200 {
			t.Errorf("GET %s with Host %s: %d %s", list, host, code, body)
		}
	}

	names, err := ParseHosts("junban.internal,ops.example")
	if err != nil {
		t.Fatal(err)
	}
	configured := httptest.NewServer(OnlyHosts(names, e.api))
	t.Cleanup(configured.Close)
	for host, want := range map[string]int{"junban.internal": 200, "ops.example:" + port: 200, "localhost:" + port: 421, "evil.example": 421} {
		if code, body := e.send(configured.URL, host, "GET", list, "", nil); code != want {
			t.Errorf("configured names: Host %s: %d, want %d: %s", host, code, want, body)
		}
	}
}
