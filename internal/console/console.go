// Package console is junban's operator console: HTML pages served by junban-api at `/`
// (overview, order, SKU, dead letters, stuck turns) over the API's own handlers and
// tokens. Pages are Go html/template, the little JavaScript they use is embedded with
// the templates (no build step, no CDN); a read token sees the pages, an admin token
// also the buttons, and every button's POST checks the scope again.
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/api"
	"github.com/junban/junban/internal/config"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName holds the console's bearer token in the browser (HttpOnly, SameSite=Strict).
const CookieName = "junban_console_token"

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
}

// SetDefaults sets the zero fields that have a default.
func (c *Config) SetDefaults() {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
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
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.message(w, r, http.StatusNotFound, "Not found", "No console page at "+r.URL.Path+".")
	})
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
	c.mux.ServeHTTP(w, r)
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// session is one request's identity.
type session struct {
	Token string
	Scope api.Scope
}

func (s session) Admin() bool { return s.Scope >= api.ScopeAdmin }

// tokenOf returns the bearer token of r: its Authorization header (curl, scripts), else
// the console's cookie.
func tokenOf(r *http.Request) string {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return tok
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		return ck.Value
	}
	return ""
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

// gate serves fn to requests whose token has at least scope: a page without a token
// sends the browser to the login page, a POST below the scope gets 403. A POST from
// another site is refused whatever its token (the cookie is SameSite=Strict already;
// this covers browsers that send it anyway).
func (c *Console) gate(scope api.Scope, fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && crossSite(r) {
			c.message(w, r, http.StatusForbidden, "Forbidden", "A console form may only be sent from the console itself.")
			return
		}
		tok := tokenOf(r)
		s := session{Token: tok, Scope: c.scopeOf(tok)}
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
		fn(w, r, s)
	}
}

func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		return err != nil || u.Host != r.Host
	}
	return false
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

func (c *Console) message(w http.ResponseWriter, r *http.Request, status int, title, text string) {
	tok := tokenOf(r)
	c.render(w, r, status, "message", view{Title: title, Session: session{Token: tok, Scope: c.scopeOf(tok)}, Data: text})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: safeNext(r.URL.Query().Get("next"))})
}

// safeNext keeps a redirect target on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	return next
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		c.message(w, r, http.StatusForbidden, "Forbidden", "Sign in from the console itself.")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if c.scopeOf(tok) == api.ScopeNone {
		c.render(w, r, http.StatusUnauthorized, "login", view{Title: "Sign in", Data: next,
			Error: &api.Problem{Title: "unknown token", Detail: "That is neither a read nor an admin token of this junban-api."}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
