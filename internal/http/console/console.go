// Package console is junban's operator console: HTML pages served by junban-api at `/`
// (overview, order, SKU, dead letters, stuck turns) over the API's own handlers and
// tokens. Pages are Go html/template, the little JavaScript they use is embedded with
// the templates (no build step, no CDN); a read token sees the pages, an admin token
// also the buttons, and every button's POST checks the scope again.
package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/http/api"
	"github.com/junban/junban/internal/platform/config"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// HistoryDefault is how many overview samples the chart keeps (at one per
// SampleEveryDefault: the last five minutes).
const (
	HistoryDefault     = 150
	SampleEveryDefault = 2 * time.Second
)

// Config configures a Console: what it reads, besides the API, and its Logger. The
// console registers no metrics of its own (the API's count its requests).
type Config struct {
	// API answers the pages' reads and the buttons that have an endpoint (redrive all,
	// skip); its tokens are the console's.
	API *api.Server
	// Redis, Prefix, DB and SQS feed the overview's counts and the SKU page's moves.
	Redis  redis.UniversalClient
	Prefix string
	DB     *gorm.DB
	SQS    *sqs.Client
	Queues config.SQS
	// IndexShards is the order-workers' backlog index shard count (0: the default).
	IndexShards int
	// Logger logs failed renders and reads; nil logs nothing.
	Logger *zap.Logger
	// Now is the clock of the pages; nil: time.Now.
	Now func() time.Time
	// SecureCookie marks the session cookie Secure and names it with the __Host- prefix:
	// browsers then send it only over HTTPS (Settings.Secure decides it for junban-api).
	SecureCookie bool
	// SessionLifetime ends a session that long after its sign-in; 0: the default.
	SessionLifetime time.Duration
	// SessionIdle ends a session unused that long; 0: the default.
	SessionIdle time.Duration
	// SignInFailures failed sign-ins from one client address within SignInWindow hold
	// its sign-ins off (429) until the window ends; 0: the defaults.
	SignInFailures int
	SignInWindow   time.Duration
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionLifetime <= 0 {
		c.SessionLifetime = SessionLifetimeDefault
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = SessionIdleDefault
	}
	if c.SignInFailures <= 0 {
		c.SignInFailures = SignInFailuresDefault
	}
	if c.SignInWindow <= 0 {
		c.SignInWindow = SignInWindowDefault
	}
}

// Validate reports the dependencies that are missing, all at once.
func (c Config) Validate() error {
	var p []error
	if c.API == nil {
		p = append(p, errors.New("console: API is required"))
	}
	if c.Redis == nil {
		p = append(p, errors.New("console: Redis is required"))
	}
	if c.DB == nil {
		p = append(p, errors.New("console: DB is required"))
	}
	if c.SignInWindow > 0 && c.SignInWindow < time.Second {
		p = append(p, errors.New("console: SignInWindow is under a second"))
	}
	return errors.Join(p...)
}

// Console is the console's http.Handler.
type Console struct {
	d     Config
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu      sync.Mutex
	history []Sample
	urls    map[string]string // queue name -> URL
	stuck   int
	stuckAt time.Time
}

// New returns the console, or an error naming what cfg lacks.
func New(cfg Config) (*Console, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Console{d: cfg, pages: map[string]*template.Template{}, mux: http.NewServeMux(), urls: map[string]string{}}
	for _, p := range []string{"overview", "order", "sku", "dlq", "stuck", "login", "confirm", "message"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(http.FileServerFS(static))))
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.logout)
	c.mux.HandleFunc("GET /{$}", c.gate(api.ScopeRead, c.overview))
	c.mux.HandleFunc("GET /overview.json", c.gate(api.ScopeRead, c.overviewJSON))
	c.mux.HandleFunc("GET /orders", c.gate(api.ScopeRead, c.orderSearch))
	c.mux.HandleFunc("GET /orders/{lcid}", c.gate(api.ScopeRead, c.orderPage))
	c.mux.HandleFunc("POST /orders/{lcid}/skip", c.gate(api.ScopeAdmin, c.skip))
	c.mux.HandleFunc("GET /skus", c.gate(api.ScopeRead, c.skuSearch))
	c.mux.HandleFunc("GET /skus/{sku}", c.gate(api.ScopeRead, c.skuPage))
	c.mux.HandleFunc("GET /dlq", c.gate(api.ScopeRead, c.dlqPage))
	c.mux.HandleFunc("GET /dlq/{queue}", c.gate(api.ScopeRead, c.dlqPage))
	c.mux.HandleFunc("POST /dlq/{queue}/redrive", c.gate(api.ScopeAdmin, c.redrive))
	c.mux.HandleFunc("POST /dlq/{queue}/delete", c.gate(api.ScopeAdmin, c.deleteMessage))
	c.mux.HandleFunc("GET /stuck", c.gate(api.ScopeRead, c.stuckPage))
	c.mux.HandleFunc("/", c.gate(api.ScopeRead, func(w http.ResponseWriter, r *http.Request, s session) {
		c.message(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("No console page at %.80q.", r.URL.Path))
	}))
	return c, nil
}

// Mount serves the API's paths (/v1/, /openapi.json) with apiHandler and everything
// else with the console.
func Mount(apiHandler http.Handler, c *Console) http.Handler {
	m := http.NewServeMux()
	m.Handle("/v1/", apiHandler)
	m.Handle("/openapi.json", apiHandler)
	m.Handle("/", c)
	return m
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	// Everything the pages load is the console's own: no inline script, no other origin.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	if err := checkOrigin(r); err != nil {
		c.d.Logger.Warn("console: cross-origin request refused", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.String("remote", r.RemoteAddr), zap.String("origin", r.Header.Get("Origin")), zap.String("sec_fetch_site", r.Header.Get("Sec-Fetch-Site")))
		c.message(w, r, http.StatusForbidden, "Forbidden", "A console form may only be sent from the console itself.")
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	}
	c.mux.ServeHTTP(w, r)
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// session is one request's identity: a console session's, a bearer header's, or none
// (admin when the API has no token).
type session struct {
	Token string
	Scope api.Scope
	// ID is the console session's id; "" for a bearer header or no identity.
	ID string
	// TokenFP is the token's fingerprint, for the logs.
	TokenFP string
}

func (s session) Admin() bool { return s.Scope >= api.ScopeAdmin }

// SignedIn reports whether the request came with a console session (it can sign out).
func (s session) SignedIn() bool { return s.ID != "" }

type sessionKeyType struct{}

// bearer returns the token of r's Authorization header (curl, scripts).
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return tok, true
}

// identify returns r's identity: its Authorization header's token, else its cookie's
// session, else none.
func (c *Console) identify(r *http.Request) (session, error) {
	if tok, ok := bearer(r); ok {
		return session{Token: tok, Scope: c.scopeOf(tok), TokenFP: fingerprint(tok)}, nil
	}
	if ck, err := r.Cookie(c.cookieName()); err == nil {
		s, err := c.loadSession(r.Context(), ck.Value)
		if err == nil || !errors.Is(err, errNoSession) {
			return s, err
		}
	}
	return session{Scope: c.scopeOf("")}, nil
}

// scopeOf asks the API what token may do.
func (c *Console) scopeOf(token string) api.Scope {
	r, _ := http.NewRequest("GET", "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	sc, _ := c.d.API.ScopeOf(r)
	return sc
}

type pageFunc func(w http.ResponseWriter, r *http.Request, s session)

// gate serves fn to requests whose identity has at least scope: a page without one
// sends the browser to the sign-in page, a POST below the scope gets 403. (ServeHTTP has
// refused cross-origin POSTs already.)
func (c *Console) gate(scope api.Scope, fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.identify(r)
		if err != nil {
			c.d.Logger.Warn("console: sessions unreadable", zap.Error(err))
			c.message(w, r, http.StatusServiceUnavailable, "Unavailable", "The console's sessions are kept in Redis, which did not answer; the log has the error.")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKeyType{}, s))
		switch {
		case s.Scope == api.ScopeNone && r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, ".json"):
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case s.Scope == api.ScopeNone:
			c.message(w, r, http.StatusUnauthorized, "Unauthorized", "Sign in with a read or admin token.")
			return
		case s.Scope < scope:
			c.message(w, r, http.StatusForbidden, "Forbidden", "This needs an admin token.")
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				c.message(w, r, http.StatusBadRequest, "Bad request", "The form could not be read (at most 64 KiB).")
				return
			}
		}
		fn(w, r, s)
	}
}

// crossOrigin is net/http's check of unsafe requests: a browser's Sec-Fetch-Site, else
// its Origin against the request's Host.
var crossOrigin = http.NewCrossOriginProtection()

// Reasons checkOrigin refuses a request beyond crossOrigin's.
var (
	errNullOrigin = errors.New("console: a request from an opaque origin (Origin: null)")
	errNoOrigin   = errors.New("console: an unsafe request without Origin or Sec-Fetch-Site, and no bearer token")
)

// checkOrigin refuses an unsafe request (anything but GET, HEAD, OPTIONS) that another
// site may have made a browser send. CrossOriginProtection lets a request with neither
// Sec-Fetch-Site nor Origin through as a non-browser's; the console's cookie is a
// browser's credential, so such a request passes only with its token in an
// Authorization header, which no other site can make a browser send. Every browser the
// console supports sends Origin with a POST.
func checkOrigin(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	origin := r.Header.Get("Origin")
	if origin == "null" {
		return errNullOrigin
	}
	if _, ok := bearer(r); !ok && origin == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return errNoOrigin
	}
	return nil
}

// callAPI runs one API request in process with the session's token and decodes a 2xx
// answer into v; any other answer comes back as its problem.
func (c *Console) callAPI(r *http.Request, s session, method, path string, body any, v any) (int, *api.Problem) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return http.StatusBadRequest, &api.Problem{Status: http.StatusBadRequest, Title: "bad request", Detail: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	rec := &recorder{header: http.Header{}}
	c.d.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status/100 != 2 {
		p := &api.Problem{Status: rec.status}
		if json.Unmarshal(rec.body.Bytes(), p) != nil || p.Title == "" {
			p.Title, p.Detail = http.StatusText(rec.status), rec.body.String()
		}
		return rec.status, p
	}
	if v != nil {
		if err := json.Unmarshal(rec.body.Bytes(), v); err != nil {
			return http.StatusInternalServerError, &api.Problem{Status: 500, Title: "bad answer", Detail: err.Error()}
		}
	}
	return rec.status, nil
}

// recorder is the ResponseWriter of an in-process API call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	Session session
	Flash   string
	Error   *api.Problem
	Data    any
	Now     time.Time
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	v.Now = c.d.Now()
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.d.Logger.Warn("console: render", zap.String("page", page), zap.Error(err))
		http.Error(w, "the page could not be rendered; the log has the error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// message renders a page of text; its menu is the gated request's session's (none for
// a request refused before its gate).
func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	s, _ := r.Context().Value(sessionKeyType{}).(session)
	c.render(w, r, status, "message", view{Title: title, Session: s, Data: text})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
}

// login signs in with a token of the API's: a session of it is stored and its id set in
// the cookie. Failed sign-ins count per client address (signInFailed); past
// SignInFailures within SignInWindow the address gets 429 until the window ends.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	held, err := c.signInHeld(ctx, r.RemoteAddr)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	if held > 0 {
		secs := int((held + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.d.Logger.Warn("console: sign-in held off", zap.String("remote", r.RemoteAddr), zap.Int("retry_after_sec", secs))
		c.render(w, r, http.StatusTooManyRequests, "login", view{Title: "Sign in", Data: "/",
			Error: &api.Problem{Title: "too many failed sign-ins", Detail: fmt.Sprintf("Too many failed sign-ins from this address: try again in %d s.", secs)}})
		return
	}
	var f signInForm
	if err = r.ParseForm(); err == nil {
		f, err = parseSignIn(r.PostForm)
	}
	scope := api.ScopeNone
	if err == nil {
		if scope = c.scopeOf(f.Token); scope == api.ScopeNone {
			err = errUnknownToken
		}
	}
	if err != nil {
		n, cerr := c.signInFailed(ctx, r.RemoteAddr)
		// The reason never quotes the token.
		c.d.Logger.Warn("console: sign-in failed", zap.String("remote", r.RemoteAddr), zap.String("reason", err.Error()),
			zap.Int64("failures", n), zap.NamedError("count_error", cerr))
		c.render(w, r, http.StatusUnauthorized, "login", view{Title: "Sign in", Data: cmp.Or(f.Next, "/"),
			Error: &api.Problem{Title: "sign-in failed", Detail: strings.ToUpper(err.Error()[:1]) + err.Error()[1:] + "."}})
		return
	}
	id, err := c.newSession(ctx, f.Token, scope)
	if err != nil {
		c.unavailable(w, r, err)
		return
	}
	c.d.Logger.Info("console: signed in", zap.String("remote", r.RemoteAddr), zap.String("token_fp", fingerprint(f.Token)),
		zap.String("session_fp", fingerprint(id)), zap.Bool("admin", scope >= api.ScopeAdmin))
	c.setCookie(w, id)
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// logout deletes the session where it is kept, so its cookie signs nobody in again,
// and clears the cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(c.cookieName()); err == nil {
		if err := c.deleteSession(r.Context(), ck.Value); err != nil {
			c.unavailable(w, r, err)
			return
		}
		c.d.Logger.Info("console: signed out", zap.String("remote", r.RemoteAddr), zap.String("session_fp", fingerprint(ck.Value)))
	}
	clearCookie(w, c.cookieName(), c.d.SecureCookie)
	clearCookie(w, legacyCookieName, false)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (c *Console) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	c.d.Logger.Warn("console: sessions unreadable", zap.String("path", r.URL.Path), zap.Error(err))
	c.message(w, r, http.StatusServiceUnavailable, "Unavailable", "The console's sessions are kept in Redis, which did not answer; the log has the error.")
}

// audit logs an admin's action at info: who (the token's and the session's
// fingerprints, never either), from where, what on what, and how it ended.
func (c *Console) audit(r *http.Request, s session, action, target, outcome string, err error, fields ...zap.Field) {
	sessionFP := ""
	if s.ID != "" {
		sessionFP = fingerprint(s.ID)
	}
	c.d.Logger.Info("console: admin action", append([]zap.Field{zap.String("action", action), zap.String("target", target),
		zap.String("remote", r.RemoteAddr), zap.String("token_fp", s.TokenFP), zap.String("session_fp", sessionFP),
		zap.String("outcome", outcome), zap.Error(err)}, fields...)...)
}
