package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/order/intake"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

var ctx = context.Background()

const (
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
)

var (
	docOnce sync.Once
	doc     *openapi3.T
	router  routers.Router
	docErr  error
)

// openapiDoc loads and validates the embedded document once.
func openapiDoc(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	docOnce.Do(func() {
		l := openapi3.NewLoader()
		if doc, docErr = l.LoadFromData(OpenAPI); docErr != nil {
			return
		}
		if docErr = doc.Validate(l.Context); docErr != nil {
			return
		}
		router, docErr = legacy.NewRouter(doc)
	})
	if docErr != nil {
		t.Fatalf("openapi.json: %v", docErr)
	}
	return doc, router
}

// env is one test's API over its own Redis prefix, PostgreSQL schema and queues.
type env struct {
	t      *testing.T
	rc     redis.UniversalClient
	prefix string
	db     *gorm.DB
	pgURL  string
	sqs    *sqs.Client
	q      testenv.Queues
	srv    *httptest.Server
	api    *Server
	// logs are the API's warnings and errors.
	logs *observer.ObservedLogs
}

type envOpt func(*Deps, *Options)

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	openapiDoc(t)
	e := &env{t: t}
	e.rc, e.prefix = testenv.Redis(t)
	e.pgURL = testenv.PostgresURL(t)
	var err error
	if e.db, err = (config.Postgres{URL: e.pgURL}).Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := e.db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	e.sqs = testenv.SQS(t)
	e.q = testenv.NewQueues(t, e.sqs, 5)
	var pub *queue.Publisher
	pub, err = queue.NewPublisher(queue.PublisherConfig{Client: e.sqs, QueueURL: e.q.Orders.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	led, err := ledger.New(ledger.Config{Redis: e.rc, Prefix: e.prefix, Loader: inventorydb.PGLoader{DB: e.db}})
	if err != nil {
		t.Fatal(err)
	}
	d := Deps{
		Redis: e.rc, Prefix: e.prefix, DB: e.db,
		Ledger: led,
		SQS:    e.sqs,
		Queues: config.SQS{OrdersQueue: e.q.OrdersName, OrdersDLQ: e.q.OrdersDLQName,
			ResultsQueue: e.q.ResultsName, ResultsDLQ: e.q.ResultsDLQName},
		Nudge: intake.Nudger(pub),
	}
	o := Options{ReadTokens: []string{readToken}, AdminTokens: []string{adminToken}}
	for _, f := range opts {
		f(&d, &o)
	}
	log, logs := testenv.Logger(zap.WarnLevel)
	e.logs = logs
	if e.api, err = New(ServerConfig{Deps: d, Options: o, Logger: log, Registerer: prometheus.NewRegistry()}); err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// do sends a request and checks the answer against the OpenAPI document: its status is
// one the operation documents, its content type and body match the schema. A request
// that no operation serves (unknown path, other method) must get a problem.
func (e *env) do(method, path, token string, body any) (int, []byte) {
	e.t.Helper()
	return e.send(e.srv.URL, "", method, path, token, body)
}

// send is do to the server at base with Host host (empty: base's).
func (e *env) send(base, host, method, path, token string, body any) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		raw, _ = json.Marshal(b)
	}
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	checkResponse(e.t, req, raw, resp, out)
	return resp.StatusCode, out
}

func checkResponse(t *testing.T, req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	t.Helper()
	d, rt := openapiDoc(t)
	// The router matches on the path as the document writes it.
	vreq := req.Clone(ctx)
	vreq.URL.Scheme, vreq.URL.Host, vreq.Host = "", "", ""
	if reqBody != nil {
		vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	route, params, err := rt.FindRoute(vreq)
	if err != nil {
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Fatalf("%s %s (%v) answered %d %s, not a problem: %s", req.Method, req.URL.Path, err, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s %s: problem is not JSON: %s", req.Method, req.URL.Path, body)
		}
		if err := d.Components.Schemas["Problem"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Fatalf("%s %s: problem does not match the schema: %v\n%s", req.Method, req.URL.Path, err, body)
		}
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		t.Fatalf("%s %s answered %d, which the OpenAPI document does not allow: %v\n%s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
}

// decode unmarshals an answer into v.
func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

// seedSKU inserts a SKU and its lots into PostgreSQL (the ledger loads it on first use).
func (e *env) seedSKU(s stock.SKU) {
	e.t.Helper()
	if err := e.db.Exec(`INSERT INTO skus (sku, safety_stock, version) VALUES (?, ?, ?)`, s.SKU, s.SafetyStock, s.Version).Error; err != nil {
		e.t.Fatal(err)
	}
	for loc, n := range s.LocationSafety {
		if err := e.db.Exec(`INSERT INTO sku_location_safety (sku, location, safety_stock, version) VALUES (?, ?, ?, ?)`, s.SKU, loc, n, s.Version).Error; err != nil {
			e.t.Fatal(err)
		}
	}
	for _, l := range s.Lots {
		var bb, arr any
		if l.BestBefore != "" {
			bb = l.BestBefore
		}
		if l.ArrivesAt != "" {
			arr = l.ArrivesAt
		}
		err := e.db.Exec(`INSERT INTO lots (sku, lot_id, kind, good, best_before, reg_seq, arrives_at, valid_from, valid_to, sellable, reserved, allocated, hidden, shipped, location)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.SKU, l.LotID, l.Kind, l.Good, bb, l.RegSeq, arr, l.ValidFrom, l.ValidTo,
			l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped, stock.LocationOf(l)).Error
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

func onhand(id string, reg int64, bb string, sellable int64) stock.Lot {
	return stock.Lot{LotID: id, Kind: stock.KindOnHand, Good: true, BestBefore: bb, RegSeq: reg,
		ValidFrom: stock.MinDate, ValidTo: stock.MaxDate, Sellable: sellable}
}
