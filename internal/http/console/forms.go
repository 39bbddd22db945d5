package console

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/junban/junban/internal/aws/dlq"
)

// maxFormBytes bounds the body of a console form; the largest, a DLQ action, is a few
// hundred bytes.
const maxFormBytes = 64 << 10

// Bounds of the forms' fields.
const (
	// maxTokenLen bounds a token sent to the sign-in form (the API's are 16+ characters).
	maxTokenLen = 512
	// maxFieldLen bounds a message id, a reason code or an lcid of a form.
	maxFieldLen = 256
	// maxNextLen bounds the page the sign-in goes back to.
	maxNextLen = 2048
)

// Problems of the forms; none quotes what was sent (a token must not reach a page or a log).
var (
	errTokenEmpty   = errors.New("the token is empty")
	errTokenLong    = fmt.Errorf("the token is longer than %d characters", maxTokenLen)
	errTokenChars   = errors.New("the token holds a character outside printable ASCII")
	errUnknownToken = errors.New("that is neither a read nor an admin token of this junban-api")
	errWhat         = errors.New("say what: one (with id), reason (with reason) or all (redrive only)")
	errField        = fmt.Errorf("a field is empty, longer than %d characters or holds a control character", maxFieldLen)
)

// signInForm is the sign-in form: the token and the page to go back to.
type signInForm struct {
	Token string
	// Next is a path of this site (safeNext), "/" for anything else.
	Next string
}

func parseSignIn(f url.Values) (signInForm, error) {
	s := signInForm{Token: strings.TrimSpace(f.Get("token")), Next: safeNext(f.Get("next"))}
	switch {
	case s.Token == "":
		return s, errTokenEmpty
	case len(s.Token) > maxTokenLen:
		return s, errTokenLong
	case strings.ContainsFunc(s.Token, func(r rune) bool { return r <= ' ' || r > '~' }):
		return s, errTokenChars
	}
	return s, nil
}

// safeNext keeps a redirect target on this site: a path that starts with one "/", holds
// no control character, space or backslash (browsers drop tabs and newlines from a URL
// and read "\" as "/"), neither as sent nor decoded, no "//" and no dot segment once
// decoded, and parses with no scheme or host. Anything else is "/".
func safeNext(next string) string {
	if len(next) > maxNextLen || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || unsafeInURL(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil ||
		!strings.HasPrefix(u.Path, "/") || unsafeInURL(u.Path) || strings.Contains(u.Path, "//") {
		return "/"
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return "/"
		}
	}
	return next
}

func unsafeInURL(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' })
}

// plainField reports whether v is a non-empty, bounded form value without control
// characters.
func plainField(v string) bool {
	return v != "" && len(v) <= maxFieldLen && !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f })
}

// dlqForm is a DLQ action's form: what to act on, and whether the confirmation page
// was passed.
type dlqForm struct {
	// What is "one" (ID), "reason" (Reason) or "all" (a redrive only).
	What, ID, Reason string
	Confirmed        bool
}

func parseDLQForm(f url.Values, act dlq.Action) (dlqForm, error) {
	d := dlqForm{What: f.Get("what"), Confirmed: f.Get("confirm") == "yes"}
	switch {
	case d.What == "one":
		d.ID = f.Get("id")
		if !plainField(d.ID) {
			return dlqForm{}, fmt.Errorf("id: %w", errField)
		}
	case d.What == "reason":
		d.Reason = f.Get("reason")
		if !plainField(d.Reason) {
			return dlqForm{}, fmt.Errorf("reason: %w", errField)
		}
	case d.What == "all" && act == dlq.Move:
	default:
		return dlqForm{}, errWhat
	}
	return d, nil
}

// fields are the form's values that the confirmation page sends again.
func (d dlqForm) fields() map[string]string {
	m := map[string]string{"what": d.What}
	if d.ID != "" {
		m["id"] = d.ID
	}
	if d.Reason != "" {
		m["reason"] = d.Reason
	}
	return m
}

// subject words what the action acts on, for the confirmation page and the logs.
func (d dlqForm) subject() string {
	switch d.What {
	case "one":
		return "message " + d.ID
	case "reason":
		return "every message with reason " + d.Reason
	}
	return "every message"
}

// match picks the messages of a one or reason action; nil for all.
func (d dlqForm) match() func(dlq.Message) bool {
	switch d.What {
	case "one":
		return func(m dlq.Message) bool { return m.ID == d.ID }
	case "reason":
		return func(m dlq.Message) bool { return ReasonCode(m.Reason) == d.Reason }
	}
	return nil
}

// skipForm is the skip button's form on an order's page.
type skipForm struct {
	LCID      string
	Confirmed bool
}

func parseSkip(lcid string, f url.Values) (skipForm, error) {
	if !plainField(lcid) {
		return skipForm{}, fmt.Errorf("lcid: %w", errField)
	}
	return skipForm{LCID: lcid, Confirmed: f.Get("confirm") == "yes"}, nil
}
