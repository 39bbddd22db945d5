package api

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/junban/junban/internal/event"
)

// MaxEntityLength bounds a turn's entity: an order's lcid, or "sku:" and a SKU.
const MaxEntityLength = event.MaxIDLength + len("sku:")

// quoteMax is how many bytes of a refused input a problem quotes: a 60 KB id is refused
// with a few dozen bytes, not echoed.
const quoteMax = 40

// quoteID quotes at most the first quoteMax bytes of s (Go syntax: a control character
// or an invalid byte shows as an escape), and says how long s is when it cuts.
func quoteID(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	cut := quoteMax
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut-- // not inside a character, when s is valid UTF-8 there
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// clip cuts a detail to n bytes, at a character's start.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + "..."
}

// checkID refuses an id a request names (a path's lcid, SKU or queue, a query's SKU or a
// cursor) before any lookup: empty, longer than max bytes, or what event.CheckID refuses
// (a brace, a control character or NUL, invalid UTF-8), which Redis keys, PostgreSQL and
// the logs could not carry. The problem quotes the id's start only.
func checkID(name, v string, max int) error {
	switch {
	case v == "":
		return badRequest("%s is empty", name)
	case len(v) > max:
		return badRequest("%s %s is longer than %d bytes", name, quoteID(v), max)
	case event.CheckID(v) != nil:
		return badRequest("%s %s holds a brace, ~, a control character, U+FFFE, U+FFFF or invalid UTF-8", name, quoteID(v))
	}
	return nil
}

// longPathIDs are the routes whose path id may be longer than event.MaxIDLength: a turn
// is an entity's.
var longPathIDs = map[string]int{"/v1/turns/{lcid}/skip": MaxEntityLength}

// pathWildcards are the names of pattern's wildcards ("/v1/skus/{sku}": sku).
func pathWildcards(pattern string) []string {
	var out []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
			if name != "$" {
				out = append(out, name)
			}
		}
	}
	return out
}

// checkPathIDs checks every path id of a request to pattern with checkID.
func checkPathIDs(pattern string, value func(name string) string) error {
	max, ok := longPathIDs[pattern]
	if !ok {
		max = event.MaxIDLength
	}
	for _, name := range pathWildcards(pattern) {
		if err := checkID(name, value(name), max); err != nil {
			return err
		}
	}
	return nil
}
