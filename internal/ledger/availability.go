package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/redis/redisscript"
)

// AvailabilityRequest asks what an allocation of Mode on TargetDate would get now.
type AvailabilityRequest struct {
	SKU string `json:"sku"`
	// TargetDate is the date the lots must be valid on (YYYY-MM-DD).
	TargetDate string     `json:"target_date"`
	Mode       stock.Mode `json:"mode"`
	// Qty, when positive, asks whether an allocation of Qty would succeed; 0 asks nothing.
	Qty int64 `json:"qty"`
}

func (r AvailabilityRequest) Validate() error {
	if err := stock.CheckSKU(r.SKU); err != nil {
		return err
	}
	if r.Qty != 0 {
		if err := stock.CheckQty("qty", r.Qty); err != nil {
			return err
		}
	}
	if err := stock.CheckDate("target_date", r.TargetDate); err != nil {
		return err
	}
	if r.Mode != stock.ModeShip && r.Mode != stock.ModeReserve {
		return stock.Invalidf("mode %q is neither %q nor %q", r.Mode, stock.ModeShip, stock.ModeReserve)
	}
	return nil
}

// Candidate is a lot an allocation may take from, with its sellable quantity. Its
// attributes are the ones the allocation order uses, read from the candidate index: a
// planned lot has no BestBefore here (planned lots go newest first; a best-before counts
// from its receipt on).
type Candidate struct {
	LotID      string `json:"lot_id"`
	Kind       string `json:"kind"`
	BestBefore string `json:"best_before,omitempty"`
	RegSeq     int64  `json:"reg_seq"`
	ValidFrom  string `json:"valid_from"`
	ValidTo    string `json:"valid_to"`
	Sellable   int64  `json:"sellable"`
	// Location is where the lot is stored; empty for the default location.
	Location string `json:"location,omitempty"`
}

// Availability is what an allocation would get now: the answer of one atomic read with
// the allocation script's own candidate rules.
type Availability struct {
	SKU        string     `json:"sku"`
	TargetDate string     `json:"target_date"`
	Mode       stock.Mode `json:"mode"`
	// Version is the SKU's version the answer was read at.
	Version     int64 `json:"version"`
	SafetyStock int64 `json:"safety_stock"`
	// LocationSafety are the locations' own safety stocks (docs/ledger.md, "Safety stock
	// per location"), by id; absent when no location has one.
	LocationSafety map[string]int64 `json:"location_safety_stock,omitempty"`
	// Sellable is the candidates' sellable quantity.
	Sellable int64 `json:"sellable"`
	// Waiting is what the SKU's queue of waiting lines waits for (docs/ledger.md,
	// "Waiting demand"): every allocation holds it back.
	Waiting int64 `json:"waiting"`
	// Available is the most one allocation of Mode gets now (available to promise):
	// Sellable less the safety stock for ModeShip, less Waiting, never below 0; for
	// ModeShip no more than the locations' caps (each location's sellable less its own
	// safety stock) sum to, less Waiting.
	Available int64 `json:"available"`
	// Candidates are the good lots valid on TargetDate with sellable stock, in the order
	// an allocation takes from them (on-hand by best-before, then planned newest first).
	Candidates []Candidate `json:"candidates"`
	// Qty is the quantity asked about (0: none); OK tells whether an allocation of it
	// would succeed, Take what it would take, in order, and Reason ("ERR_SHORTAGE",
	// "ERR_SAFETY_STOCK") and Detail why it would fail.
	Qty    int64          `json:"qty"`
	OK     bool           `json:"ok"`
	Take   []stock.LotQty `json:"take"`
	Reason string         `json:"reason,omitempty"`
	Detail string         `json:"detail,omitempty"`
	// Locations is the answer per location with candidates, by id; absent when every
	// candidate is at the default location (the answer is then what it was before
	// locations).
	Locations []LocationAvailability `json:"locations,omitempty"`
}

// LocationAvailability is what an allocation pinned to one location would get: the
// candidates stored there, with the SKU's safety stock and the location's own over them
// (docs/ledger.md, "Locations", rule 4 with Pinned, and "Safety stock per location").
type LocationAvailability struct {
	Location string `json:"location"`
	// Sellable is the location's candidates' sellable quantity.
	Sellable int64 `json:"sellable"`
	// Available is Sellable, less the larger of the SKU's safety stock and the
	// location's own for ModeShip, less the SKU's Waiting (never below 0).
	Available int64 `json:"available"`
	// OK tells whether an allocation of the request's Qty there would succeed.
	OK bool `json:"ok"`
	// SafetyStock is the location's own safety stock (0: none).
	SafetyStock int64 `json:"safety_stock,omitempty"`
}

// Err returns the error an allocation of Qty would get (ErrShortage, ErrSafetyStock),
// nil when it would succeed or nothing was asked.
func (a Availability) Err() error {
	if a.Reason == "" {
		return nil
	}
	sentinel, _ := stock.ErrorOfReason(a.Reason)
	return stock.OpError("alloc", a.SKU, sentinel, a.Detail)
}

// Availability tells what an allocation of r.Mode on r.TargetDate would get now, and
// whether one of r.Qty would succeed, with the allocation's own candidate walk and rules
// (candidates.lua) in a read-only script. It loads the SKU from the Loader when it is
// not in Redis yet, as an allocation would.
func (l *Ledger) Availability(ctx context.Context, r AvailabilityRequest) (Availability, error) {
	if err := r.Validate(); err != nil {
		return Availability{}, err
	}
	// One call without a pipeline: the usual read of a storefront, kept cheap.
	for attempt := 0; ; attempt++ {
		a, err := parseAvailability(r, availableScript.RunRO(ctx, l.shared, []string{Key(l.prefix, r.SKU)}, r.TargetDate, string(r.Mode), r.Qty))
		if attempt == 0 {
			if again, err := l.prepare(ctx, r.SKU, err); again || err != nil {
				if err != nil {
					return Availability{}, err
				}
				continue
			}
		}
		return a, err
	}
}

// prepare answers the availability script's ERR_NOT_LOADED (loading the SKU) and
// ERR_REINDEX (re-indexing it); again tells whether it did, so the script may run again.
func (l *Ledger) prepare(ctx context.Context, sku string, scriptErr error) (again bool, err error) {
	switch {
	case errors.Is(scriptErr, stock.ErrNotLoaded):
		return true, l.Load(ctx, sku)
	case isReindexReply(scriptErr):
		_, err := l.Reindex(ctx, sku, false)
		return true, err
	}
	return false, nil
}

// Version reads the SKU's version in Redis; ok is false when the SKU is not loaded. Every
// ledger operation that changes the SKU bumps it, so an answer read at a version holds
// for as long as the version does.
func (l *Ledger) Version(ctx context.Context, sku string) (v int64, ok bool, err error) {
	if err := stock.CheckSKU(sku); err != nil {
		return 0, false, err
	}
	v, err = l.shared.HGet(ctx, Key(l.prefix, sku), fieldVersion).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// AvailabilityAnswer is one answer of AvailabilityMany: Err is the request's own error
// (invalid, unknown SKU), which does not fail the others.
type AvailabilityAnswer struct {
	Availability Availability
	Err          error
}

// AvailabilityMany answers many requests in one pipeline: one round trip per Redis
// node (a cluster client groups the pipeline by slot owner), and one more for the SKUs
// that had to be loaded first. The error is returned only when Redis itself failed;
// a request's own problem is in its answer.
func (l *Ledger) AvailabilityMany(ctx context.Context, rs []AvailabilityRequest) ([]AvailabilityAnswer, error) {
	out := make([]AvailabilityAnswer, len(rs))
	todo := make([]int, 0, len(rs))
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			out[i].Err = err
			continue
		}
		todo = append(todo, i)
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		cmds, err := l.availabilityPipe(ctx, rs, todo)
		if err != nil {
			return nil, err
		}
		var again []int
		for j, i := range todo {
			a, err := parseAvailability(rs[i], cmds[j])
			if attempt == 0 {
				if retry, err := l.prepare(ctx, rs[i].SKU, err); err != nil {
					out[i].Err = err
					continue
				} else if retry {
					again = append(again, i)
					continue
				}
			}
			if err != nil && !isLedgerError(err) {
				return nil, err
			}
			out[i] = AvailabilityAnswer{Availability: a, Err: err}
		}
		todo = again
	}
	return out, nil
}

func isLedgerError(err error) bool { return stock.Reason(err) != "ERR_INTERNAL" }

// availabilityPipe runs the script for rs[todo...] in one pipeline (by EVAL_RO for the
// calls Redis did not know the script for).
func (l *Ledger) availabilityPipe(ctx context.Context, rs []AvailabilityRequest, todo []int) ([]*redis.Cmd, error) {
	calls := make([]redisscript.Call, len(todo))
	for j, i := range todo {
		r := rs[i]
		calls[j] = redisscript.Call{Keys: []string{Key(l.prefix, r.SKU)}, Args: []any{r.TargetDate, string(r.Mode), r.Qty}}
	}
	cmds := redisscript.PipelinedRO(ctx, l.rc, availableScript, calls)
	for _, c := range cmds {
		// An error that is not a script's reply (connection, timeout) fails the lot.
		var rerr redis.Error
		if err := c.Err(); err != nil && !errors.As(err, &rerr) {
			return nil, fmt.Errorf("ledger: availability: %w", err)
		}
	}
	return cmds, nil
}

func parseAvailability(r AvailabilityRequest, c *redis.Cmd) (Availability, error) {
	a := Availability{SKU: r.SKU, TargetDate: r.TargetDate, Mode: r.Mode, Qty: r.Qty, Candidates: []Candidate{}, Take: []stock.LotQty{}}
	v, err := c.Slice()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			if e, _, ok := scriptError("availability", r.SKU, err); ok {
				return a, e
			}
		}
		return a, fmt.Errorf("ledger: availability sku=%s: %w", r.SKU, err)
	}
	bad := func() (Availability, error) {
		return a, fmt.Errorf("ledger: availability sku=%s: unexpected reply %v", r.SKU, v)
	}
	if len(v) != 10 {
		return bad()
	}
	str := func(x any) string { s, _ := x.(string); return s }
	num := func(x any) (int64, error) { return strconv.ParseInt(str(x), 10, 64) }
	if a.Version, err = num(v[0]); err != nil {
		return bad()
	}
	if a.SafetyStock, err = num(v[1]); err != nil {
		return bad()
	}
	if a.Sellable, err = num(v[2]); err != nil {
		return bad()
	}
	if w := str(v[9]); w != "" {
		if a.Waiting, err = num(w); err != nil {
			return bad()
		}
	}
	a.Available = max(a.Sellable-a.Waiting, 0)
	if r.Mode == stock.ModeShip {
		a.Available = max(a.Sellable-a.SafetyStock-a.Waiting, 0)
	}
	a.Reason, a.Detail = str(v[3]), str(v[4])
	a.OK = r.Qty > 0 && a.Reason == ""
	var ok bool
	if a.Candidates, ok = parseCandidates(str(v[5])); !ok {
		return bad()
	}
	take, _ := v[6].([]any)
	for i := 0; i+1 < len(take); i += 2 {
		q, err := num(take[i+1])
		if err != nil {
			return bad()
		}
		a.Take = append(a.Take, stock.LotQty{LotID: str(take[i]), Qty: q})
	}
	if a.LocationSafety, err = stock.DecodeLocationSafety(str(v[8])); err != nil {
		return bad()
	}
	if err := a.readLocations(r, v[7]); err != nil {
		return bad()
	}
	slices.SortFunc(a.Locations, func(x, y LocationAvailability) int { return strings.Compare(x.Location, y.Location) })
	if a.Reason != "" {
		if _, known := stock.ErrorOfReason(a.Reason); !known || strings.Contains(a.Reason, " ") {
			return bad()
		}
	}
	return a, nil
}

// parseCandidates reads the script's candidates text: a line "head sellable\tlot\tlocation"
// per candidate (available.lua).
func parseCandidates(text string) ([]Candidate, bool) {
	out := make([]Candidate, 0, strings.Count(text, "\n")+1)
	for text != "" {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		if len(line) < 46 {
			return nil, false
		}
		c, ok := decodeRecordHead(line[:46])
		sell, rest, cut := strings.Cut(line[46:], "\t")
		lot, loc, cut2 := strings.Cut(rest, "\t")
		if !ok || !cut || !cut2 {
			return nil, false
		}
		var err error
		if c.Sellable, err = strconv.ParseInt(sell, 10, 64); err != nil {
			return nil, false
		}
		c.LotID, c.Location = lot, loc
		out = append(out, c)
	}
	return out, true
}

// readLocations reads the script's per-location sellable (flat location, sellable;
// none when every candidate is at the default location) into a.Locations, and caps
// a.Available for ModeShip by the locations' own safety stocks, less a.Waiting, as
// ledger.lua's queuedCapRefusal does.
func (a *Availability) readLocations(r AvailabilityRequest, reply any) error {
	locs, _ := reply.([]any)
	by := map[string]int64{}
	for i := 0; i+1 < len(locs); i += 2 {
		s, _ := locs[i].(string)
		n, _ := locs[i+1].(string)
		sell, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return err
		}
		la := LocationAvailability{Location: cmp.Or(s, stock.DefaultLocation), Sellable: sell, Available: max(sell-a.Waiting, 0)}
		la.SafetyStock = a.LocationSafety[la.Location]
		if r.Mode == stock.ModeShip {
			la.Available = max(sell-max(a.SafetyStock, la.SafetyStock)-a.Waiting, 0)
		}
		la.OK = r.Qty > 0 && la.Available >= r.Qty
		a.Locations = append(a.Locations, la)
		by[la.Location] = sell
	}
	if len(locs) == 0 {
		by[stock.DefaultLocation] = a.Sellable
	}
	if r.Mode == stock.ModeShip && a.LocationSafety != nil {
		var capped int64
		for _, s := range stock.LessLocationSafety(by, a.LocationSafety) {
			capped += s
		}
		a.Available = min(a.Available, max(capped-a.Waiting, 0))
	}
	return nil
}

// decodeRecordHead reads a candidate's attributes from its index record without the
// field name: AllocKey (kind, best-before or the planned marker, registration number) and
// the validity period (indexRecord writes them; TestAllocKeyAndLayout keeps the two
// in step).
func decodeRecordHead(h string) (Candidate, bool) {
	if len(h) != 46 {
		return Candidate{}, false
	}
	reg, err := strconv.ParseInt(h[11:26], 10, 64)
	if err != nil {
		return Candidate{}, false
	}
	c := Candidate{ValidFrom: h[26:36], ValidTo: h[36:46]}
	switch h[0] {
	case 'o':
		c.Kind, c.RegSeq = stock.KindOnHand, reg
		if bb := h[1:11]; bb != stock.NoBestFirst {
			c.BestBefore = bb
		}
	case 'p':
		c.Kind, c.RegSeq = stock.KindPlanned, stock.MaxRegSeq-reg
	default:
		return Candidate{}, false
	}
	return c, true
}

// SellableByLocation is the sellable of sku's candidates on date per location (only
// locations with candidates), less each location's own safety stock (a location left
// with none is absent), from one availability read: what the order-worker's
// fewest_splits plan reads (domain.LocationStock).
func (l *Ledger) SellableByLocation(ctx context.Context, sku, date string) (map[string]int64, error) {
	a, err := l.Availability(ctx, AvailabilityRequest{SKU: sku, TargetDate: date, Mode: stock.ModeReserve})
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	if len(a.Locations) == 0 {
		if a.Sellable > 0 {
			out[stock.DefaultLocation] = a.Sellable
		}
		return stock.LessLocationSafety(out, a.LocationSafety), nil
	}
	for _, la := range a.Locations {
		if la.Sellable > 0 {
			out[la.Location] = la.Sellable
		}
	}
	return stock.LessLocationSafety(out, a.LocationSafety), nil
}
