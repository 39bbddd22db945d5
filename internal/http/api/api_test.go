package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
)

// The document is valid OpenAPI 3.1 and is what /openapi.json serves, without a token.
func TestOpenAPIDocument(t *testing.T) {
	e := newEnv(t)
	d, _ := openapiDoc(t)
	if !d.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", d.OpenAPI)
	}
	code, body := e.do("GET", "/openapi.json", "", nil)
	if code != 200 || string(body) != string(OpenAPI) {
		t.Fatalf("/openapi.json: %d, %d bytes", code, len(body))
	}
	// Every route the server serves is in the document, and the other way round.
	for path, item := range d.Paths.Map() {
		for method := range item.Operations() {
			p := strings.NewReplacer("{sku}", "S", "{lcid}", "LC-1", "{queue}", "nope").Replace(path)
			code, _ := e.do(method, p, adminToken, nil)
			if code == http.StatusMethodNotAllowed || (code == 404 && !strings.Contains(path, "{")) {
				t.Errorf("%s %s: %d: documented but not served", method, path, code)
			}
		}
	}
}

// SKU: from Redis once loaded, from PostgreSQL (and said so) before; lots paginated.
func TestSKU(t *testing.T) {
	e := newEnv(t)
	s := stock.SKU{SKU: "SKU-1", SafetyStock: 2, Version: 3, Lots: []stock.Lot{
		onhand("L1", 1, "2027-01-01", 5), onhand("L2", 2, "2026-12-20", 3), onhand("L3", 3, "", 7)}}
	e.seedSKU(s)
	code, body := e.do("GET", "/v1/skus/SKU-1", readToken, nil)
	var v SKUView
	decode(t, body, &v)
	if code != 200 || v.Source != "postgres" || v.Version != 3 || len(v.Lots) != 3 || v.Lots[0].Sellable != 5 {
		t.Fatalf("before load: %d %s", code, body)
	}
	if err := e.api.d.Ledger.Load(ctx, "SKU-1"); err != nil {
		t.Fatal(err)
	}
	code, body = e.do("GET", "/v1/skus/SKU-1?limit=2", readToken, nil)
	v = SKUView{}
	decode(t, body, &v)
	if code != 200 || v.Source != "redis" || len(v.Lots) != 2 || v.NextCursor == "" {
		t.Fatalf("after load, page 1: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/skus/SKU-1?limit=2&cursor="+v.NextCursor, readToken, nil)
	v = SKUView{}
	decode(t, body, &v)
	if code != 200 || len(v.Lots) != 1 || v.Lots[0].LotID != "L3" || v.NextCursor != "" {
		t.Fatalf("page 2: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/v1/skus/NOPE":                     404,
		"/v1/skus/SKU-1?limit=0":            400,
		"/v1/skus/SKU-1?limit=x":            400,
		"/v1/skus/SKU-1?cursor=%21%21":      400,
		"/v1/skus/SKU-1?colour=red":         400,
		"/v1/skus/" + url.PathEscape("{x}"): 400,
	} {
		if code, body := e.do("GET", path, readToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
}

// A SKU with lots at two locations answers per location beside the total, and so does
// the cart; a SKU at the default location only answers as before locations.
func TestAvailabilityPerLocation(t *testing.T) {
	e := newEnv(t)
	store := onhand("S1", 3, "2027-02-01", 4)
	store.Location = "store-1"
	e.seedSKU(stock.SKU{SKU: "M", SafetyStock: 2, Lots: []stock.Lot{
		onhand("L1", 1, "2027-01-01", 5), onhand("L2", 2, "2026-12-20", 3), store}})
	e.seedSKU(stock.SKU{SKU: "D", Lots: []stock.Lot{onhand("L1", 1, "2027-01-01", 5)}})
	code, body := e.do("GET", "/v1/skus/M/availability?date=2026-12-01&qty=4", readToken, nil)
	var a ledger.Availability
	decode(t, body, &a)
	availBody := body
	want := []ledger.LocationAvailability{
		{Location: "default", Sellable: 8, Available: 6, OK: true},
		{Location: "store-1", Sellable: 4, Available: 2, OK: false},
	}
	if code != 200 || a.Sellable != 12 || a.Available != 10 || !a.OK || !slices.Equal(a.Locations, want) {
		t.Fatalf("two locations: %d %s", code, body)
	}
	// GET /v1/skus/{sku} shows where each lot is (absent: the default location).
	code, body = e.do("GET", "/v1/skus/M", readToken, nil)
	var v SKUView
	decode(t, body, &v)
	if code != 200 || len(v.Lots) != 3 || v.Lots[0].Location != "" || v.Lots[2].Location != "store-1" {
		t.Fatalf("GET /v1/skus/M: %d %s", code, body)
	}
	// The shop has described no location: the default one counts toward the network, a
	// location it lacks does not.
	var n AvailabilityAnswer
	body = availBody
	decode(t, body, &n)
	if n.Network == nil || figures(*n.Network) != (netFigures{Sellable: 8, Available: 6, OK: true}) ||
		len(n.Locations) != 2 || !n.Locations[0].Network || n.Locations[1].Network {
		t.Fatalf("two locations, the network: %s", body)
	}
	code, body = e.do("POST", "/v1/availability", readToken, CartRequest{Date: "2026-12-01", Mode: "reserve", Items: []CartItem{{SKU: "M", Qty: 5}, {SKU: "D"}}})
	var c CartAnswer
	decode(t, body, &c)
	wantCart := []LocationAnswer{
		{LocationAvailability: ledger.LocationAvailability{Location: "default", Sellable: 8, Available: 8, OK: true}, Network: true},
		{LocationAvailability: ledger.LocationAvailability{Location: "store-1", Sellable: 4, Available: 4, OK: false}},
	}
	if code != 200 || c.Items[0].Availability == nil || !slices.Equal(c.Items[0].Availability.Locations, wantCart) ||
		figures(*c.Items[0].Availability.Network) != (netFigures{Sellable: 8, Available: 8, OK: true}) ||
		c.Items[1].Availability == nil || c.Items[1].Availability.Locations != nil {
		t.Fatalf("cart: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/skus/D/availability?date=2026-12-01", readToken, nil)
	if code != 200 || bytes.Contains(body, []byte(`"locations"`)) {
		t.Fatalf("default location only: %d %s", code, body)
	}
	// ?location= answers for one of the shop's locations; one it lacks is a 404.
	if err := ledger.PublishLocations(context.Background(), e.rc, e.prefix, []stock.Location{
		{ID: "store-1", Kind: stock.LocationStore, Pickup: true, Enabled: true},
		{ID: "wh-9", Kind: stock.LocationWarehouse, Ships: true, Enabled: true},
	}, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want ledger.LocationAvailability
	}{
		{"/v1/skus/M/availability?date=2026-12-01&qty=2&location=store-1", ledger.LocationAvailability{Location: "store-1", Sellable: 4, Available: 2, OK: true}},
		{"/v1/skus/M/availability?date=2026-12-01&qty=2&location=wh-9", ledger.LocationAvailability{Location: "wh-9"}},
		{"/v1/skus/D/availability?date=2026-12-01&qty=2&location=default", ledger.LocationAvailability{Location: "default", Sellable: 5, Available: 5, OK: true}},
		{"/v1/skus/D/availability?date=2026-12-01&qty=2&location=store-1", ledger.LocationAvailability{Location: "store-1"}},
	} {
		code, body := e.do("GET", c.path, readToken, nil)
		a = ledger.Availability{}
		decode(t, body, &a)
		if code != 200 || !slices.Equal(a.Locations, []ledger.LocationAvailability{c.want}) {
			t.Fatalf("GET %s: %d %s, want locations [%+v]", c.path, code, body, c.want)
		}
	}
	// A store the shop described, enabled but not shipping, does not count.
	code, body = e.do("GET", "/v1/skus/M/availability?date=2026-12-01&qty=8", readToken, nil)
	n = AvailabilityAnswer{}
	decode(t, body, &n)
	if code != 200 || n.Network == nil || figures(*n.Network) != (netFigures{Sellable: 8, Available: 6, OK: false}) ||
		len(n.Locations) != 2 || n.Locations[1].Network {
		t.Fatalf("a store that does not ship: %d %s", code, body)
	}
	// A store that ships counts toward the network.
	if err := ledger.PublishLocations(context.Background(), e.rc, e.prefix, []stock.Location{
		{ID: "store-1", Kind: stock.LocationStore, Ships: true, Enabled: true},
	}, false); err != nil {
		t.Fatal(err)
	}
	code, body = e.do("GET", "/v1/skus/M/availability?date=2026-12-01&qty=9", readToken, nil)
	n = AvailabilityAnswer{}
	decode(t, body, &n)
	if code != 200 || n.Network == nil || figures(*n.Network) != (netFigures{Sellable: 12, Available: 10, OK: true}) ||
		len(n.Locations) != 2 || !n.Locations[1].Network {
		t.Fatalf("a store that ships: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/v1/skus/M/availability?date=2026-12-01&location=nowhere": 404,
		"/v1/skus/M/availability?date=2026-12-01&location=":        400,
		"/v1/skus/M/availability?date=2026-12-01&location=%7Ex":    400,
	} {
		if code, body := e.do("GET", path, readToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}
}

func TestAvailabilityEndpoints(t *testing.T) {
	e := newEnv(t)
	e.seedSKU(stock.SKU{SKU: "A", SafetyStock: 2, Lots: []stock.Lot{
		onhand("L1", 1, "2027-01-01", 5), onhand("L2", 2, "2026-12-20", 3),
		{LotID: "P1", Kind: stock.KindPlanned, Good: true, RegSeq: 3, ValidFrom: "2026-12-10", ValidTo: stock.MaxDate, Sellable: 10}}})
	code, body := e.do("GET", "/v1/skus/A/availability?date=2026-12-01&qty=6", readToken, nil)
	var a ledger.Availability
	decode(t, body, &a)
	if code != 200 || a.Available != 6 || !a.OK || !slices.Equal(a.Take, []stock.LotQty{{LotID: "L2", Qty: 3}, {LotID: "L1", Qty: 3}}) || len(a.Candidates) != 2 {
		t.Fatalf("ship: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/skus/A/availability?date=2026-12-01&mode=ship&qty=7", readToken, nil)
	a = ledger.Availability{}
	decode(t, body, &a)
	if code != 200 || a.OK || a.Reason != "ERR_SAFETY_STOCK" || len(a.Take) != 0 {
		t.Fatalf("ship 7: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/skus/A/availability?date=2026-12-10&mode=reserve", readToken, nil)
	a = ledger.Availability{}
	decode(t, body, &a)
	if code != 200 || a.Available != 18 || a.Qty != 0 || a.OK || len(a.Candidates) != 3 || a.Candidates[2].LotID != "P1" {
		t.Fatalf("reserve on the 10th: %d %s", code, body)
	}
	for path, want := range map[string]int{
		"/v1/skus/A/availability":                           400,
		"/v1/skus/A/availability?date=2026-02-30":           400,
		"/v1/skus/A/availability?date=2026-12-01&mode=both": 400,
		"/v1/skus/A/availability?date=2026-12-01&qty=0":     400,
		"/v1/skus/A/availability?date=2026-12-01&qty=-3":    400,
		"/v1/skus/A/availability?date=2026-12-01&qty=1e3":   400,
		"/v1/skus/A/availability?date=2026-12-01&qyt=3":     400,
		"/v1/skus/NOPE/availability?date=2026-12-01":        404,
	} {
		if code, body := e.do("GET", path, readToken, nil); code != want {
			t.Errorf("GET %s: %d, want %d: %s", path, code, want, body)
		}
	}

	// A cart: one answer per item, the unknown SKU a problem of its own.
	var items []CartItem
	for i := range 5 {
		sku := fmt.Sprint("C", i)
		e.seedSKU(stock.SKU{SKU: sku, Lots: []stock.Lot{onhand("L", 1, "", int64(i))}})
		items = append(items, CartItem{SKU: sku, Qty: 2})
	}
	items = append(items, CartItem{SKU: "NOPE", Qty: 1}, CartItem{SKU: "A"})
	code, body = e.do("POST", "/v1/availability", readToken, CartRequest{Date: "2026-12-01", Mode: "reserve", Items: items})
	var cart CartAnswer
	decode(t, body, &cart)
	if code != 200 || cart.OK || len(cart.Items) != 7 {
		t.Fatalf("cart: %d %s", code, body)
	}
	for i := range 5 {
		if av := cart.Items[i].Availability; av == nil || av.Available != int64(i) || av.OK != (i >= 2) {
			t.Errorf("cart item %d: %+v", i, cart.Items[i])
		}
	}
	if p := cart.Items[5].Problem; p == nil || p.Status != 404 || p.Reason != "ERR_UNKNOWN_SKU" {
		t.Errorf("unknown SKU in the cart: %+v", cart.Items[5])
	}
	if av := cart.Items[6].Availability; av == nil || av.Available != 8 || av.Qty != 0 {
		t.Errorf("qty 0 in the cart: %+v", cart.Items[6])
	}
	many := make([]CartItem, MaxCartSKUsDefault+1)
	for i := range many {
		many[i] = CartItem{SKU: "A", Qty: 1}
	}
	for name, c := range map[string]struct {
		body any
		want int
	}{
		"too many":      {CartRequest{Date: "2026-12-01", Items: many}, 400},
		"no items":      {CartRequest{Date: "2026-12-01"}, 400},
		"no date":       {CartRequest{Items: items[:1]}, 400},
		"bad mode":      {CartRequest{Date: "2026-12-01", Mode: "x", Items: items[:1]}, 400},
		"negative qty":  {CartRequest{Date: "2026-12-01", Items: []CartItem{{SKU: "A", Qty: -1}}}, 400},
		"unknown field": {`{"date":"2026-12-01","items":[{"sku":"A"}],"colour":1}`, 400},
		"not json":      {`{"date":`, 400},
		"two values":    {`{"date":"2026-12-01","items":[{"sku":"A"}]} {}`, 400},
		"empty":         {"", 400},
		"too large":     {`{"date":"2026-12-01","items":[{"sku":"` + strings.Repeat("x", MaxBodyBytesDefault) + `"}]}`, 413},
	} {
		if code, body := e.do("POST", "/v1/availability", readToken, c.body); code != c.want {
			t.Errorf("cart %s: %d, want %d: %.300s", name, code, c.want, body)
		}
	}
}

// No token: 401; an unknown one: 401; a read token on an admin endpoint: 403; unknown
// paths and methods: problems.
func TestAccess(t *testing.T) {
	e := newEnv(t)
	admin := []struct{ method, path string }{
		{"GET", "/v1/dlq/" + e.q.OrdersDLQName},
		{"POST", "/v1/dlq/" + e.q.OrdersDLQName + "/redrive"},
		{"POST", "/v1/turns/LC-1/skip"},
	}
	for _, a := range admin {
		for token, want := range map[string]int{"": 401, "wrong-token-0123456789": 401, readToken: 403} {
			if code, body := e.do(a.method, a.path, token, nil); code != want {
				t.Errorf("%s %s with %q: %d, want %d: %s", a.method, a.path, token, code, want, body)
			}
		}
	}
	for _, path := range []string{"/v1/skus/A", "/v1/orders", "/v1/turns/stuck", "/v1/orders/LC-1"} {
		if code, _ := e.do("GET", path, "", nil); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
		if code, _ := e.do("GET", path, "Basic "+readToken, nil); code != 401 {
			t.Errorf("GET %s with a malformed header: %d, want 401", path, code)
		}
	}
	if code, _ := e.do("GET", "/v1/turns/stuck", readToken, nil); code != 200 {
		t.Errorf("stuck turns with a read token: %d", code)
	}
	if code, _ := e.do("GET", "/v1/turns/stuck", adminToken, nil); code != 200 {
		t.Errorf("stuck turns with an admin token: %d", code)
	}
	if code, _ := e.do("GET", "/v1/nothing", readToken, nil); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	if code, _ := e.do("DELETE", "/v1/skus/A", adminToken, nil); code != 405 {
		t.Errorf("DELETE: %d", code)
	}
	// A second token of each scope works: rotation.
	e2 := newEnv(t, func(d *Deps, o *Options) {
		o.ReadTokens = append(o.ReadTokens, "read-token-rotated-01")
	})
	if code, _ := e2.do("GET", "/v1/turns/stuck", "read-token-rotated-01", nil); code != 200 {
		t.Errorf("the rotated read token: %d", code)
	}
}

// Redis unreachable: 503 problems, the error logged and not shown; a request past the
// timeout: 503 too.
func TestBackingServiceDown(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	e := newEnv(t, func(d *Deps, o *Options) {
		led, err := ledger.New(ledger.Config{Redis: dead, Prefix: d.Prefix})
		if err != nil {
			t.Fatal(err)
		}
		d.Redis, d.Ledger = dead, led
	})
	for _, path := range []string{"/v1/skus/A", "/v1/skus/A/availability?date=2026-12-01", "/v1/orders/LC-1", "/v1/turns/stuck"} {
		code, body := e.do("GET", path, readToken, nil)
		if code != 503 || strings.Contains(string(body), "127.0.0.1:1") {
			t.Errorf("GET %s with Redis down: %d %s", path, code, body)
		}
	}
	slow := newEnv(t, func(d *Deps, o *Options) { o.RequestTimeout = time.Nanosecond })
	if code, body := slow.do("GET", "/v1/skus/A/availability?date=2026-12-01", readToken, nil); code != 503 || !strings.Contains(string(body), "did not finish within") {
		t.Errorf("past the timeout: %d %s", code, body)
	}
}

// netFigures are a network answer's sellable, available and ok, comparable.
type netFigures struct {
	Sellable, Available int64
	OK                  bool
}

func figures(n NetworkAvailability) netFigures {
	return netFigures{Sellable: n.Sellable, Available: n.Available, OK: n.OK}
}

// A location's own safety stock shows on the SKU and in its availability: the location's
// row keeps it back, and the network figure takes no more there than it leaves.
func TestAvailabilityUnderLocationSafetyStock(t *testing.T) {
	e := newEnv(t)
	store := onhand("S1", 3, "2027-02-01", 4)
	store.Location = "store-1"
	e.seedSKU(stock.SKU{SKU: "M", SafetyStock: 1, LocationSafety: map[string]int64{"default": 6},
		Lots: []stock.Lot{onhand("L1", 1, "2027-01-01", 8), store}})
	code, body := e.do("GET", "/v1/skus/M/availability?date=2026-12-01&qty=3", readToken, nil)
	var n AvailabilityAnswer
	decode(t, body, &n)
	want := []ledger.LocationAvailability{
		{Location: "default", Sellable: 8, Available: 2, OK: false, SafetyStock: 6},
		{Location: "store-1", Sellable: 4, Available: 3, OK: true},
	}
	var got []ledger.LocationAvailability
	for _, l := range n.Locations {
		got = append(got, l.LocationAvailability)
	}
	if code != 200 || n.Available != 6 || !slices.Equal(got, want) ||
		n.Network == nil || figures(*n.Network) != (netFigures{Sellable: 8, Available: 2, OK: false}) || n.Network.Reason != "ERR_SAFETY_STOCK" {
		t.Fatalf("availability: %d %s", code, body)
	}
	code, body = e.do("GET", "/v1/skus/M", readToken, nil)
	var v SKUView
	decode(t, body, &v)
	if code != 200 || v.LocationSafety["default"] != 6 {
		t.Fatalf("GET /v1/skus/M: %d %s", code, body)
	}
}
