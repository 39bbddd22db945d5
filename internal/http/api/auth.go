package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Scope is what a token may do.
type Scope int

// Scopes, each including the ones before it.
const (
	ScopeNone Scope = iota
	ScopeRead
	ScopeAdmin
)

// authenticator checks bearer tokens. Every token is compared, in constant time, as a
// SHA-256 digest, so neither the position of a match nor a token's length shows in the
// time an answer takes.
type authenticator struct {
	read, admin [][sha256.Size]byte
	// open: no token configured (the API serves loopback only), every request is admin.
	open bool
}

func newAuthenticator(read, admin []string) *authenticator {
	a := &authenticator{open: len(read) == 0 && len(admin) == 0}
	for _, t := range read {
		a.read = append(a.read, sha256.Sum256([]byte(t)))
	}
	for _, t := range admin {
		a.admin = append(a.admin, sha256.Sum256([]byte(t)))
	}
	return a
}

// scope returns the scope of r's bearer token, and false when r carries none.
func (a *authenticator) scope(r *http.Request) (Scope, bool) {
	if a.open {
		return ScopeAdmin, true
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return ScopeNone, false
	}
	d := sha256.Sum256([]byte(tok))
	var isRead, isAdmin int
	for i := range a.read {
		isRead |= subtle.ConstantTimeCompare(d[:], a.read[i][:])
	}
	for i := range a.admin {
		isAdmin |= subtle.ConstantTimeCompare(d[:], a.admin[i][:])
	}
	switch {
	case isAdmin == 1:
		return ScopeAdmin, true
	case isRead == 1:
		return ScopeRead, true
	}
	return ScopeNone, true
}
