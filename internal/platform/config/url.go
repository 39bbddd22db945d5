package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// redacted stands for the credentials RedactURL takes out.
const redacted = "xxxxx"

// keywordPassword finds a password=value pair: of a keyword/value connection string
// (DATABASE_URL may be one) or a URL's query.
var keywordPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)`)

// scheme matches a URL's scheme and its "://" (RFC 3986): one found further on may be in a
// password.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// RedactURL returns raw with its credentials replaced by "xxxxx": everything between the
// scheme's "://" (or the start, without a scheme) and the last '@', and the value of any
// password=. It needs no successful parse, unlike url.URL.Redacted: where a parser would
// misread a password holding '/', '?' or '#' as a host, a port or a path, the last '@'
// still ends it. A user name goes too.
func RedactURL(raw string) string {
	s := keywordPassword.ReplaceAllString(raw, "${1}"+redacted)
	start := len(scheme.FindString(s))
	if at := strings.LastIndex(s, "@"); at >= start {
		s = s[:start] + redacted + s[at:]
	}
	return s
}

// urlError is the error of the setting name, whose value raw the parser refused. Its text
// comes from RedactURL(raw) alone: the parser's own error quotes the raw string (and may
// quote part of a password as a host or a port), so the redacted string is parsed again
// for the reason, which the error wraps. When the redacted string parses, the fault was in
// the part taken out.
func urlError(name, raw string, parse func(string) error) error {
	r := RedactURL(raw)
	if err := parse(r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return fmt.Errorf("%s: %q: the part before '@' (user name and password) is malformed", name, r)
}

// parsePostgres parses a DATABASE_URL value as pgx will (a URL or keyword/value pairs).
func parsePostgres(s string) error {
	_, err := pgx.ParseConfig(s)
	return err
}
