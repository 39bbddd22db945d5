package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Hosts is the set of names a request's Host may give: OnlyHosts answers any other Host
// 421. A page that rebinds a name of its own to 127.0.0.1 (DNS rebinding) sends that
// name as the Host, so a server that answers its own names only never serves it.
type Hosts struct {
	// any: every Host passes (a proxy in front checks it).
	any bool
	// names are lower case, without a port or a final dot; IP addresses in their
	// canonical form.
	names map[string]bool
}

// AnyHost lets every Host through.
func AnyHost() Hosts { return Hosts{any: true} }

// loopbackNames are the names of this machine that no page can rebind.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// LoopbackHosts is the default of a loopback listener on host: localhost, 127.0.0.1,
// ::1, and host itself when it is an address (127.0.0.2).
func LoopbackHosts(host string) Hosts {
	h := Hosts{names: map[string]bool{}}
	for _, n := range loopbackNames {
		h.names[n] = true
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		h.names[a.Unmap().WithZone("").String()] = true
	}
	return h
}

// ParseHosts reads JUNBAN_API_ALLOWED_HOSTS: names and addresses, comma separated,
// without ports; "*" alone lets every Host through. The problems quote at most a name's
// first 40 bytes.
func ParseHosts(list string) (Hosts, error) {
	h, problems := parseHosts(list)
	var p []error
	for _, s := range problems {
		p = append(p, errors.New(s))
	}
	return h, errors.Join(p...)
}

// parseHosts is ParseHosts with its problems apart (Config.Validate names the variable
// in each).
func parseHosts(list string) (Hosts, []string) {
	var p []string
	h := Hosts{names: map[string]bool{}}
	names := strings.Split(list, ",")
	for i, n := range names {
		n = strings.TrimSpace(n)
		switch {
		case n == "*":
			h.any = true
		case n == "":
			p = append(p, fmt.Sprintf("name %d is empty", i+1))
		case !validHostName(n):
			p = append(p, fmt.Sprintf("name %d, %s, is neither a DNS name nor an IP address (no port, no scheme)", i+1, quoteID(n)))
		default:
			h.names[canonicalHost(n)] = true
		}
	}
	if h.any && len(names) > 1 {
		p = append(p, `"*" allows every name: give it alone`)
	}
	return h, p
}

// validHostName: an IP address (an IPv6 one with or without brackets), or a DNS name of
// letters, digits, hyphens, underscores and dots.
func validHostName(n string) bool {
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")); err == nil {
		return true
	}
	if len(n) > 253 || strings.HasPrefix(n, ".") || strings.Contains(n, "..") {
		return false
	}
	return !strings.ContainsFunc(n, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	})
}

// canonicalHost is a name as Hosts keeps it: lower case, no final dot, no brackets, an
// address in its canonical form (::ffff:127.0.0.1 is 127.0.0.1).
func canonicalHost(n string) string {
	n = strings.ToLower(strings.TrimSuffix(n, "."))
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return n
}

// hostOf is the name of a Host header: without its port.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// Allows reports whether a request whose Host header is hostport (a port or none) may
// be answered. An empty Host (an HTTP/1.0 request) names nothing.
func (h Hosts) Allows(hostport string) bool {
	if h.any {
		return true
	}
	n := hostOf(hostport)
	return n != "" && h.names[canonicalHost(n)]
}

// String lists the names, for the start line: "*" for any.
func (h Hosts) String() string {
	if h.any {
		return "*"
	}
	out := make([]string, 0, len(h.names))
	for n := range h.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// OnlyHosts serves next to the requests whose Host h allows, and answers the others 421
// Misdirected Request with a problem, before next sees them. Wrap the whole handler (the
// API and the console), not the API alone: the console calls the API in process, with
// no Host.
func OnlyHosts(h Hosts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Allows(r.Host) {
			writeProblem(w, r, http.StatusMisdirectedRequest, ProblemMisdirected,
				"Host "+quoteID(r.Host)+" is none of this server's names (JUNBAN_API_ALLOWED_HOSTS)", "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
