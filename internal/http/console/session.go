package console

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/http/api"
)

// Defaults of the console's sessions and sign-in limit (Config, Settings).
const (
	// SessionLifetimeDefault ends a session that long after its sign-in, however busy.
	SessionLifetimeDefault = 12 * time.Hour
	// SessionIdleDefault ends a session unused that long.
	SessionIdleDefault = 30 * time.Minute
	// SignInFailuresDefault failed sign-ins from one client address within
	// SignInWindowDefault hold the address's sign-ins off until the window ends.
	SignInFailuresDefault = 10
	SignInWindowDefault   = 15 * time.Minute
	// SecureCookieAuto: the cookie is Secure unless JUNBAN_API_ADDR is a loopback address.
	SecureCookieAuto = "auto"
)

// Cookie names of the session: with Secure, the __Host- prefix tells the browser to keep
// the cookie only from a secure origin of this very host, path /, no Domain.
const (
	CookieName       = "junban_console_session"
	SecureCookieName = "__Host-" + CookieName
	// legacyCookieName held the raw token in older versions; signing in or out clears it.
	legacyCookieName = "junban_console_token"
)

// Settings are the console's variables, which junban-api reads beside the API's.
type Settings struct {
	// SecureCookie is "true", "false" or "auto": Secure (and named __Host-...) unless
	// JUNBAN_API_ADDR is a loopback address.
	SecureCookie string `env:"JUNBAN_CONSOLE_SECURE_COOKIE"`
	// SessionLifetime ends a session that long after its sign-in.
	SessionLifetime time.Duration `env:"JUNBAN_CONSOLE_SESSION_LIFETIME"`
	// SessionIdle ends a session unused that long.
	SessionIdle time.Duration `env:"JUNBAN_CONSOLE_SESSION_IDLE"`
}

// SetDefaults gives the settings their named defaults (config.Load calls it).
func (s *Settings) SetDefaults() {
	s.SecureCookie = SecureCookieAuto
	s.SessionLifetime = SessionLifetimeDefault
	s.SessionIdle = SessionIdleDefault
}

// Validate checks the settings, every problem at once.
func (s Settings) Validate() error {
	var p []error
	switch s.SecureCookie {
	case "true", "false", SecureCookieAuto:
	default:
		p = append(p, fmt.Errorf("JUNBAN_CONSOLE_SECURE_COOKIE: %q is none of true, false, auto", s.SecureCookie))
	}
	if s.SessionLifetime <= 0 {
		p = append(p, errors.New("JUNBAN_CONSOLE_SESSION_LIFETIME: must be positive"))
	}
	if s.SessionIdle <= 0 {
		p = append(p, errors.New("JUNBAN_CONSOLE_SESSION_IDLE: must be positive"))
	}
	return errors.Join(p...)
}

// Secure reports whether the session cookie is Secure for an API served on addr.
func (s Settings) Secure(addr string) bool {
	switch s.SecureCookie {
	case "true":
		return true
	case "false":
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	return err != nil || !api.Loopback(host)
}

// Key builds every Redis key of the console: prefix + ":console:" + kind + ":" + id. Each
// is used alone (no multi-key command), so none needs a hash tag.
func Key(prefix, kind, id string) string { return prefix + ":console:" + kind + ":" + id }

// Key kinds.
const (
	kindSession = "session"
	kindSignIn  = "signin-failures"
)

// record is a session as Redis keeps it, under the SHA-256 of its id: the token sealed
// with a key derived from the id, so neither Redis's keys nor its values give a session
// id or a token away.
type record struct {
	// Scope is the token's scope at the sign-in; a token that changed scope ends the
	// session.
	Scope api.Scope `json:"scope"`
	// Sealed is the token, AES-GCM sealed with sealKey(id).
	Sealed []byte `json:"sealed"`
	// TokenFP is the token's fingerprint, for the logs.
	TokenFP string `json:"token_fp"`
	// Created is the sign-in's time; Seen the session's last use.
	Created time.Time `json:"created"`
	Seen    time.Time `json:"seen"`
}

// sessionIDLen is the length of a session id: 32 random bytes, base64url.
var sessionIDLen = base64.RawURLEncoding.EncodedLen(32)

func newSessionID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validSessionID reports whether id has the shape newSessionID gives, so that anything
// else a cookie holds costs no Redis call.
func validSessionID(id string) bool {
	if len(id) != sessionIDLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// fingerprint is the first 8 hex digits of s's SHA-256: enough to tell tokens or sessions
// apart in a log, far too little to find one.
func fingerprint(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:4])
}

func sessionKey(prefix, id string) string {
	d := sha256.Sum256([]byte(id))
	return Key(prefix, kindSession, hex.EncodeToString(d[:]))
}

func sealer(id string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, []byte(id), nil, "junban console session token", 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(b)
}

// errNoSession: the cookie names no live session (never one, ended, expired, revoked).
var errNoSession = errors.New("console: no such session")

// newSession stores a session of token (of scope) and returns its id.
func (c *Console) newSession(ctx context.Context, token string, scope api.Scope) (string, error) {
	id := newSessionID()
	aead, err := sealer(id)
	if err != nil {
		return "", err
	}
	now := c.d.Now()
	rec := record{Scope: scope, Sealed: aead.Seal(nil, nil, []byte(token), nil), TokenFP: fingerprint(token), Created: now, Seen: now}
	b, _ := json.Marshal(rec)
	if err := c.d.Redis.SetArgs(ctx, sessionKey(c.d.Prefix, id), b, redis.SetArgs{Mode: "NX", TTL: c.d.SessionIdle}).Err(); err != nil {
		return "", fmt.Errorf("console: store session: %w", err)
	}
	return id, nil
}

// loadSession returns the session of id with its token, and marks it used; a session
// past its idle time or lifetime, or whose token is no longer configured with the scope
// it signed in with, is deleted and answers errNoSession.
func (c *Console) loadSession(ctx context.Context, id string) (session, error) {
	if !validSessionID(id) {
		return session{}, errNoSession
	}
	key := sessionKey(c.d.Prefix, id)
	b, err := c.d.Redis.Get(ctx, key).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return session{}, errNoSession
	case err != nil:
		return session{}, fmt.Errorf("console: read session: %w", err)
	}
	var rec record
	var tok []byte
	aead, err := sealer(id)
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err == nil {
		tok, err = aead.Open(nil, nil, rec.Sealed, nil)
	}
	now := c.d.Now()
	end := rec.Created.Add(c.d.SessionLifetime)
	if err != nil || !now.Before(end) || now.Sub(rec.Seen) >= c.d.SessionIdle || c.scopeOf(string(tok)) != rec.Scope {
		_ = c.d.Redis.Del(ctx, key).Err() // ended for good: a failed delete leaves it to its TTL
		return session{}, errNoSession
	}
	rec.Seen = now
	b, _ = json.Marshal(rec)
	// XX: a session deleted meanwhile (a sign-out) stays deleted.
	ttl := min(c.d.SessionIdle, end.Sub(now))
	if err := c.d.Redis.SetArgs(ctx, key, b, redis.SetArgs{Mode: "XX", TTL: max(ttl, time.Millisecond)}).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return session{}, fmt.Errorf("console: touch session: %w", err)
	}
	return session{Token: string(tok), Scope: rec.Scope, ID: id, TokenFP: rec.TokenFP}, nil
}

func (c *Console) deleteSession(ctx context.Context, id string) error {
	if !validSessionID(id) {
		return nil
	}
	return c.d.Redis.Del(ctx, sessionKey(c.d.Prefix, id)).Err()
}

func (c *Console) cookieName() string {
	if c.d.SecureCookie {
		return SecureCookieName
	}
	return CookieName
}

func (c *Console) setCookie(w http.ResponseWriter, id string) {
	http.SetCookie(w, &http.Cookie{Name: c.cookieName(), Value: id, Path: "/", MaxAge: int(c.d.SessionLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.d.SecureCookie})
	clearCookie(w, legacyCookieName, false)
}

func clearCookie(w http.ResponseWriter, name string, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure})
}

// clientKey is the address whose sign-in failures count together: the remote IP, an
// IPv6 one by its /64 (one host has a /64 to pick from).
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "unknown"
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// signInHeld reports how long the client's sign-ins are held off, 0 when they are not.
// The failures are counted in Redis, so every replica holds the same address off.
func (c *Console) signInHeld(ctx context.Context, remoteAddr string) (time.Duration, error) {
	key := Key(c.d.Prefix, kindSignIn, clientKey(remoteAddr))
	var n *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := c.d.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		n, ttl = p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("console: read sign-in failures: %w", err)
	}
	if k, _ := n.Int(); k < c.d.SignInFailures {
		return 0, nil
	}
	return max(ttl.Val(), time.Second), nil
}

// signInFailed counts a failure of the client's; the window starts at its first.
func (c *Console) signInFailed(ctx context.Context, remoteAddr string) (int64, error) {
	key := Key(c.d.Prefix, kindSignIn, clientKey(remoteAddr))
	var n *redis.IntCmd
	_, err := c.d.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Incr(ctx, key)
		p.ExpireNX(ctx, key, c.d.SignInWindow)
		return nil
	})
	return n.Val(), err
}
