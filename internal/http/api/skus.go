package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	gojson "github.com/goccy/go-json"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// SKUView is GET /v1/skus/{sku}.
type SKUView struct {
	stock.SKU
	// Source is "redis" (the live state) or "postgres" (not loaded into Redis yet: the
	// state the first allocation will load).
	Source string `json:"source"`
	// NextCursor continues the lot list; empty on its last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (s *Server) getSKU(w http.ResponseWriter, r *http.Request) error {
	sku := r.PathValue("sku")
	limit, after, paged, err := seqPageQuery(r.URL.Query(), 1000, 1000)
	if err != nil {
		return err
	}
	v, err := s.d.ReadSKU(r.Context(), sku)
	if err != nil {
		return err
	}
	// Lots are in registration order; the cursor is the last lot's registration number.
	lots := v.Lots
	if paged {
		i := 0
		for i < len(lots) && lots[i].RegSeq <= after {
			i++
		}
		lots = lots[i:]
	}
	if len(lots) > limit {
		lots = lots[:limit]
		v.NextCursor = encodeCursor(strconv.FormatInt(lots[len(lots)-1].RegSeq, 10))
	}
	v.Lots = lots
	writeJSON(w, http.StatusOK, v)
	return nil
}

// ReadSKU returns a SKU's settings, version and every lot from Redis, or from
// PostgreSQL (Source "postgres") while it is not loaded: what GET /v1/skus/{sku} and
// junbanctl stock show.
func (d Deps) ReadSKU(ctx context.Context, sku string) (SKUView, error) {
	if err := checkID("sku", sku, event.MaxIDLength); err != nil {
		return SKUView{}, err
	}
	if err := stock.CheckSKU(sku); err != nil {
		return SKUView{}, err
	}
	v := SKUView{Source: "redis"}
	var err error
	v.SKU, err = d.Ledger.Snapshot(ctx, sku)
	if errors.Is(err, stock.ErrNotLoaded) {
		v.Source = "postgres"
		v.SKU, err = inventorydb.PGLoader{DB: d.DB}.LoadSKU(ctx, sku)
		v.SKU.SKU = sku
	}
	// The waiting lines are GET /v1/skus/{sku}/queue's, from either source; a load
	// carries them, a snapshot does not.
	v.SKU.Queue, v.SKU.QueueSeq = nil, 0
	return v, err
}

func availabilityParams(date, mode string) (stock.Mode, error) {
	if date == "" {
		return "", badRequest("date is required (YYYY-MM-DD)")
	}
	if len(date) != len(stock.MinDate) {
		return "", badRequest("date %s is not a date (YYYY-MM-DD)", quoteID(date))
	}
	if err := stock.CheckDate("date", date); err != nil {
		return "", err
	}
	switch mode {
	case "", string(stock.ModeShip):
		return stock.ModeShip, nil
	case string(stock.ModeReserve):
		return stock.ModeReserve, nil
	}
	return "", badRequest("mode %s is neither ship nor reserve", quoteID(mode))
}

// availabilityQuery reads the query of GET /v1/skus/{sku}/availability: date, mode,
// qty (SKU left empty) and location ("" when none is asked).
func availabilityQuery(q url.Values) (ledger.AvailabilityRequest, string, error) {
	if err := onlyParams(q, "date", "mode", "qty", "location"); err != nil {
		return ledger.AvailabilityRequest{}, "", err
	}
	mode, err := availabilityParams(q.Get("date"), q.Get("mode"))
	if err != nil {
		return ledger.AvailabilityRequest{}, "", err
	}
	var qty int64
	if v := q.Get("qty"); v != "" {
		if qty, err = strconv.ParseInt(v, 10, 64); err != nil || qty < 1 || qty > stock.MaxQty {
			return ledger.AvailabilityRequest{}, "", badRequest("qty %s is not an integer within 1..%d", quoteID(v), stock.MaxQty)
		}
	}
	loc := q.Get("location")
	if _, asked := q["location"]; asked {
		if err := stock.CheckLocation(loc); err != nil {
			return ledger.AvailabilityRequest{}, "", badRequest("location %s is not a location id", quoteID(loc))
		}
	}
	return ledger.AvailabilityRequest{TargetDate: q.Get("date"), Mode: mode, Qty: qty}, loc, nil
}

// forLocation keeps a's answer for location loc alone: its entry of a.Locations (one of
// nothing when no candidate is there), or the whole answer's when every candidate is at
// the default location.
func forLocation(a ledger.Availability, loc string) ledger.Availability {
	one := ledger.LocationAvailability{Location: loc}
	switch {
	case a.Locations == nil && loc == stock.DefaultLocation && len(a.Candidates) > 0:
		one.Sellable, one.Available = a.Sellable, a.Available
		one.OK = a.Qty > 0 && one.Available >= a.Qty
	default:
		for _, l := range a.Locations {
			if l.Location == loc {
				one = l
			}
		}
	}
	a.Locations = []ledger.LocationAvailability{one}
	return a
}

func (s *Server) getAvailability(w http.ResponseWriter, r *http.Request) error {
	req, loc, err := availabilityQuery(r.URL.Query())
	if err != nil {
		return err
	}
	sku := r.PathValue("sku")
	req.SKU = sku
	if loc != "" {
		locs, err := ledger.ReadLocations(r.Context(), s.d.Redis, s.d.Prefix)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(locs, func(l stock.Location) bool { return l.ID == loc }) {
			return notFound("", "no such location %s", quoteID(loc))
		}
	}
	key := availKey{sku: sku, date: req.TargetDate, mode: req.Mode, qty: req.Qty, location: loc}
	// The SKU's version first: an answer the script gave at this very version is the
	// answer now (every ledger operation bumps it), and costs no walk.
	if v, ok, err := s.d.Ledger.Version(r.Context(), sku); err == nil && ok {
		if body, hit := s.avail.get(key, v); hit {
			s.m.availHits.Inc()
			writeEncoded(w, http.StatusOK, body)
			return nil
		}
	}
	a, err := s.d.Ledger.Availability(r.Context(), req)
	if err != nil {
		return err
	}
	if loc != "" {
		a = forLocation(a, loc)
	}
	ans, err := s.d.WithNetwork(r.Context(), a)
	if err != nil {
		return err
	}
	if loc != "" {
		ans.Network = nil // one location's answer: the network's figures are the whole answer's
	}
	enc, err := gojson.Marshal(ans)
	if err != nil {
		return err
	}
	body := append(enc, '\n')
	s.avail.put(key, a.Version, body)
	writeEncoded(w, http.StatusOK, body)
	return nil
}

// CartRequest is the body of POST /v1/availability.
type CartRequest struct {
	Date  string     `json:"date"`
	Mode  string     `json:"mode"`
	Items []CartItem `json:"items"`
}

// CartItem is one SKU of a cart; Qty 0 asks only what is available.
type CartItem struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// CartAnswer is the answer of POST /v1/availability: one item per requested SKU, in
// order, each an availability or a problem of its own.
type CartAnswer struct {
	Date string     `json:"date"`
	Mode stock.Mode `json:"mode"`
	// OK is true when every item asked a quantity and each would succeed.
	OK    bool       `json:"ok"`
	Items []CartLine `json:"items"`
}

// CartLine is one answer of a cart.
type CartLine struct {
	SKU          string              `json:"sku"`
	Availability *AvailabilityAnswer `json:"availability,omitempty"`
	Problem      *Problem            `json:"problem,omitempty"`
}

// cartRequests reads a POST /v1/availability body into one request per item, at most
// maxItems of them. An item's SKU is the ledger's to check: a bad one is that item's
// problem in the answer.
func cartRequests(r *http.Request, maxItems int) (CartRequest, []ledger.AvailabilityRequest, error) {
	var req CartRequest
	if err := decodeBody(r, &req); err != nil {
		return req, nil, err
	}
	mode, err := availabilityParams(req.Date, req.Mode)
	if err != nil {
		return req, nil, err
	}
	if len(req.Items) == 0 {
		return req, nil, badRequest("items is empty")
	}
	if len(req.Items) > maxItems {
		return req, nil, badRequest("%d items: at most %d per call (JUNBAN_API_MAX_CART_SKUS)", len(req.Items), maxItems)
	}
	rs := make([]ledger.AvailabilityRequest, len(req.Items))
	for i, it := range req.Items {
		if it.Qty < 0 || it.Qty > stock.MaxQty {
			return req, nil, badRequest("items[%d].qty %d is not within 0..%d", i, it.Qty, stock.MaxQty)
		}
		rs[i] = ledger.AvailabilityRequest{SKU: it.SKU, TargetDate: req.Date, Mode: mode, Qty: it.Qty}
	}
	return req, rs, nil
}

func (s *Server) postAvailability(w http.ResponseWriter, r *http.Request) error {
	req, rs, err := cartRequests(r, s.o.MaxCartSKUs)
	if err != nil {
		return err
	}
	mode := rs[0].Mode
	answers, err := s.d.Ledger.AvailabilityMany(r.Context(), rs)
	if err != nil {
		return err
	}
	out := CartAnswer{Date: req.Date, Mode: mode, OK: true, Items: make([]CartLine, len(answers))}
	var locs []stock.Location // read once, for the first answer per location
	for i, a := range answers {
		line := CartLine{SKU: req.Items[i].SKU}
		switch {
		case a.Err == nil:
			if len(a.Availability.Locations) > 0 && locs == nil {
				if locs, err = ledger.ReadLocations(r.Context(), s.d.Redis, s.d.Prefix); err != nil {
					return err
				}
			}
			av := networkOf(a.Availability, locs)
			line.Availability = &av
			out.OK = out.OK && av.OK
		case errors.Is(a.Err, stock.ErrUnknownSKU):
			line.Problem = &Problem{Type: ProblemNotFound, Title: problemTitles[ProblemNotFound], Status: http.StatusNotFound, Detail: "no such SKU", Reason: "ERR_UNKNOWN_SKU"}
			out.OK = false
		case stock.Reason(a.Err) != "ERR_INTERNAL":
			line.Problem = &Problem{Type: ProblemInvalid, Title: problemTitles[ProblemInvalid], Status: http.StatusBadRequest, Detail: a.Err.Error(), Reason: stock.Reason(a.Err)}
			out.OK = false
		default:
			return a.Err
		}
		out.Items[i] = line
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

const emptyBodyDetail = "the body is empty"

// decodeBody reads one JSON object into v, refusing unknown fields and trailing data.
func decodeBody(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &apiError{status: http.StatusUnsupportedMediaType, typ: ProblemInvalid, detail: "the body must be application/json"}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return badRequest(emptyBodyDetail)
		}
		// A JSON error may quote the body (an unknown field's name): cut.
		return badRequest("the body is not the JSON object this endpoint takes: %s", clip(err.Error(), 200))
	}
	if dec.More() {
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}
