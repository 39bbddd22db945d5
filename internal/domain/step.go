package domain

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// Ledger is what the state machine needs of internal/ledger: *ledger.Ledger (Redis) and
// *stock.Model (the plain-Go reference) both provide it.
type Ledger interface {
	Apply(ctx context.Context, op stock.Op) (stock.Result, error)
}

// Reasons of rejected events, beside the ledger's (stock.Reason).
const (
	ReasonInvalidTransition = "ERR_INVALID_TRANSITION"
	ReasonOrderExists       = "ERR_ORDER_EXISTS"
	ReasonParkedTooLong     = "ERR_PARKED_TOO_LONG"
	// ReasonUndoRefused rejects an event whose ledger operations could not all be undone
	// after one of its lines was refused: the ledger refused an undo, because the bucket
	// no longer held what the event had moved into it. The moves that stay are in the
	// result (an operation without its "-undo" twin); they need an operator.
	ReasonUndoRefused = "ERR_UNDO_REFUSED"
	// ReasonUnknownLine rejects an order.returned that names a line the order lacks.
	ReasonUnknownLine = "ERR_UNKNOWN_LINE"
	// ReasonReturnExceedsShipped rejects an order.returned of more units of a line than
	// were shipped and not returned yet.
	ReasonReturnExceedsShipped = "ERR_RETURN_EXCEEDS_SHIPPED"
	// ReasonReservationExpired refuses an event that needs the reservation of an order that
	// expired (a payment included: it is recorded, refused, and the shop decides).
	ReasonReservationExpired = "ERR_RESERVATION_EXPIRED"
	// ReasonHoldNotDue refuses an order.reservation_expired whose hold has moved since it
	// was found due (extended, or ended by a payment or an allocation for shipment).
	ReasonHoldNotDue = "ERR_HOLD_NOT_DUE"
	// ReasonInvalidHold refuses a hold the order cannot take: on a ship-mode order, on an
	// order that is not placed in reserve mode, or one that ends before the event occurred.
	ReasonInvalidHold = "ERR_INVALID_HOLD"
	// ReasonAlreadyAtLocation refuses an order.allocation_moved whose line holds units at
	// its to_location only: there is nothing to move.
	ReasonAlreadyAtLocation = "ERR_ALREADY_AT_LOCATION"
	// ReasonLocationUnavailable refuses an order.allocation_moved to a location the shop
	// does not have or has disabled.
	ReasonLocationUnavailable = "ERR_LOCATION_UNAVAILABLE"
)

// State is everything junban keeps of one entity in its turn: the order (nil before
// order.placed, and for SKU entities), the result counter and the parked events.
type State struct {
	// Seq counts the results the entity has produced; each result carries the next one,
	// so persistence can keep the newest.
	Seq    int64                `json:"seq"`
	Order  *event.OrderSnapshot `json:"order,omitempty"`
	Parked []Parked             `json:"parked,omitempty"`
	// Requeued counts, per event id, the quarantines of an event that left no result:
	// each undid the event's ledger operations, so its next run names its operations
	// afresh (see txn.opID) instead of meeting the remembered, undone ones. An entry
	// leaves with the event's result.
	Requeued map[string]int `json:"requeued,omitempty"`
}

// Parked is an event whose precondition did not hold yet (payment before placement).
type Parked struct {
	Body     json.RawMessage `json:"body"`
	Arrival  int64           `json:"arrival"`
	ParkedAt time.Time       `json:"parked_at"`
}

// Step applies ev to st and then retries the parked events while any of them applies.
// It returns the new state and one result per event that applied or was rejected (ev
// itself yields none when it is parked). Ledger operations carry op ids derived from
// the event, so a re-run of the same step with the same state gets the same answers.
// A returned error is transient (Redis unreachable): nothing must be committed.
func Step(ctx context.Context, l Ledger, pol Policy, st State, ev Event, arrival int64, now time.Time) (State, []event.Result, error) {
	for _, p := range st.Parked {
		if p.EventID() == ev.EventID {
			return st, nil, nil // a redelivery of a parked event: already in custody here
		}
	}
	st.Parked = slices.Clone(st.Parked)
	var results []event.Result
	res, parked, err := apply(ctx, l, pol, &st, ev, arrival, now)
	if err != nil {
		return State{}, nil, err
	}
	if parked {
		body, err := json.Marshal(ev.Order)
		if err != nil {
			return State{}, nil, err
		}
		st.Parked = append(st.Parked, Parked{Body: body, Arrival: arrival, ParkedAt: now})
		return st, nil, nil
	}
	results = append(results, res)
	// Every result may be the precondition a parked event waited for.
	for progress := true; progress && len(st.Parked) > 0; {
		progress = false
		for i := 0; i < len(st.Parked); i++ {
			p := st.Parked[i]
			pev, err := Decode(p.Body, 0)
			if err != nil {
				return State{}, nil, fmt.Errorf("order: parked event no longer decodes: %w", err)
			}
			res, stillParked, err := apply(ctx, l, pol, &st, pev, p.Arrival, now)
			if err != nil {
				return State{}, nil, err
			}
			if stillParked {
				continue
			}
			results = append(results, res)
			st.Parked = slices.Delete(st.Parked, i, i+1)
			i--
			progress = true
		}
	}
	return st, results, nil
}

// EventID is the parked event's id ("" when its body has none).
func (p Parked) EventID() string {
	var h struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal(p.Body, &h) // a body without one has no id to show
	return h.EventID
}

// apply runs one event against st (changing it on success) and returns its result, or
// parked=true when its precondition does not hold yet.
func apply(ctx context.Context, l Ledger, pol Policy, st *State, ev Event, arrival int64, now time.Time) (event.Result, bool, error) {
	t := &txn{ctx: ctx, l: fenced(l, st.Seq), pol: pol, now: now, ev: ev, gen: st.Requeued[ev.EventID], skus: map[skuAt]stock.SKU{}}
	t.stock, _ = l.(LocationStock)
	var (
		tr  transition
		err error
	)
	if k := ev.Kind(); k != nil && k.step != nil {
		tr, err = k.step(t, st.Order, ev.Payload())
	} else {
		// Only a drain has no step, and a drain never reaches one.
		return event.Result{}, false, fmt.Errorf("domain: %s events have no step", ev.Type)
	}
	next, reason, park := tr.next, tr.reason, tr.park
	if err == nil && reason != "" {
		// A rejected event leaves the ledger as it found it: what its earlier lines moved
		// is moved back.
		reason, err = t.rollback(reason)
	}
	if err != nil {
		return event.Result{}, false, err
	}
	if park {
		return event.Result{}, true, nil
	}
	if next != nil {
		st.Order = next
	}
	if _, ok := st.Requeued[ev.EventID]; ok {
		st.Requeued = maps.Clone(st.Requeued)
		delete(st.Requeued, ev.EventID)
		if len(st.Requeued) == 0 {
			st.Requeued = nil
		}
	}
	st.Seq++
	res := event.Result{
		EventID:     ev.EventID,
		Entity:      ev.Entity(),
		LCID:        ev.LCID,
		Seq:         st.Seq,
		Arrival:     arrival,
		Type:        ev.Type,
		Outcome:     event.Applied,
		Reason:      reason,
		Order:       st.Order,
		Moves:       t.moves,
		Holders:     t.holders,
		HolderCount: t.holderCount,
		ProcessedAt: now.UTC(),
	}
	if reason != "" {
		res.Outcome = event.Rejected
		res.Detail = strings.Join(t.refusals, "; ")
	}
	for _, s := range t.skus {
		res.SKUs = append(res.SKUs, s)
	}
	slices.SortFunc(res.SKUs, compareSKUAt)
	return res, false, nil
}

// fencedLedger makes each operation at one fence (stock.Fenced): the entity's result
// counter before the event's result. A re-run of a step that did not commit runs from the
// same state, so its operations are made at the same fence and replay; an operation
// remembered at another fence (the entity moved on since) is refused with
// ERR_OP_FENCED instead of answering the old step's answer.
type fencedLedger struct {
	l     Ledger
	fence string
}

func fenced(l Ledger, seq int64) fencedLedger {
	return fencedLedger{l: l, fence: strconv.FormatInt(seq, 10)}
}

func (f fencedLedger) Apply(ctx context.Context, op stock.Op) (stock.Result, error) {
	return f.l.Apply(ctx, stock.Fenced{Op: op, Fence: f.fence})
}

// compareSKUAt orders a result's SKUs by name, then version.
func compareSKUAt(a, b stock.SKU) int {
	if c := cmp.Compare(a.SKU, b.SKU); c != 0 {
		return c
	}
	return cmp.Compare(a.Version, b.Version)
}

// txn collects the ledger effects of one event.
type txn struct {
	ctx   context.Context
	l     Ledger
	pol   Policy
	now   time.Time // the step's clock: only for a default hold of an event without occurred_at
	ev    Event
	gen   int // State.Requeued of the event
	moves []stock.Move
	// skus holds the lots each operation touched, at the SKU version it left: one entry
	// per version, since other orders' operations on the SKU may come between two of
	// this event's, and a lot one operation left is only known at that version.
	skus map[skuAt]stock.SKU
	// done are the operations that moved something, in order: what rollback undoes.
	done []stock.Result
	// refusals are what the ledger said when it refused an operation (and an undo).
	refusals []string
	// holders are the orders a recall found holding the lot.
	holders     []stock.Holder
	holderCount int
	// locs is the shop's locations as the step read them (txn.shop).
	locs *stock.ShopLocations
	// stock reads the SKUs' stock per location for a fewest_splits plan (nil: the
	// ledger cannot, and orders are not planned).
	stock LocationStock
}

// holder is who the event's ledger operations hold stock for: the order, for an order's
// events (the ledger records it per lot, and a recall lists it); nobody for a SKU's.
func (t *txn) holder() string {
	if _, inventory := t.ev.InventorySKU(); inventory {
		return ""
	}
	return t.ev.LCID
}

type skuAt struct {
	sku     string
	version int64
}

// opID names a ledger operation of the event. An order's event names the order first:
// "{<lcid>}<event_id>:<line>:<step>" (an order.lines_changed names its one operation per
// SKU "{<lcid>}<event_id>:<sku>:change"), so that two orders' events that share an event
// id (upstream systems reuse them) never share an operation. A SKU's event names none:
// "<event_id>:<lot>:<step>" (its entity is the SKU, whose turn dedups its events). After
// the event's n-th quarantine the event id is "<event_id>~<n>" (event.OwnMark: no sender's
// event id holds it, so none can take these names first). Ids longer than the
// ledger's bound are hashed (boundedOpID). The braces make the order's part unambiguous
// (no id in an event may hold one) and keep these ids apart from every legacy one.
func (t *txn) opID(line, step string) string {
	id := t.rawOpID(line, step)
	if _, inventory := t.ev.InventorySKU(); inventory {
		return boundedOpID(id)
	}
	return boundedOpID("{" + t.ev.LCID + "}" + id)
}

// legacyOpID is the id a worker that did not name the order gave an order's operation
// ("" for a SKU's event, whose ids did not change). A step that such a worker applied and
// did not commit (it crashed in between) is re-run by a newer one: the ledger replays
// the operation's record under this id (stock.AllocateRequest.LegacyOpID) instead of
// applying it again. Such a record lives one op retention at most.
func (t *txn) legacyOpID(line, step string) string {
	if _, inventory := t.ev.InventorySKU(); inventory {
		return ""
	}
	return boundedOpID(t.rawOpID(line, step))
}

// rawOpID is "<event_id>[~<gen>]:<line>:<step>", unbounded (event and line ids may each be
// up to event.MaxIDLength bytes).
func (t *txn) rawOpID(line, step string) string {
	id := t.ev.EventID
	if t.gen > 0 {
		id += event.OwnMark + strconv.Itoa(t.gen)
	}
	return id + ":" + line + ":" + step
}

// undoOpID names the operation that undoes op (and, from op's legacy id, its legacy id).
func undoOpID(op string) string { return boundedOpID(op + "-undo") }

// boundedOpID is id, or, when id is longer than the ledger accepts, "h:" and its SHA-256.
// An id that fits is never changed, so a step re-run by a newer worker names its
// operations as the older one did (or, where the naming changed, carries the older name
// as the legacy op id: see legacyOpID).
func boundedOpID(id string) string {
	if len(id) <= stock.MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h:" + hex.EncodeToString(sum[:])
}

// record keeps an operation's moves, and the lots it touched at the version it left.
func (t *txn) record(r stock.Result) {
	t.moves = append(t.moves, r.Moves...)
	k := skuAt{r.SKU, r.Version}
	s := t.skus[k]
	// SafetyStock is the SKU's only for the operations that set it (0 for the others); one
	// that set a location's carries it in LocationSafety instead (0: removed).
	s.SKU, s.Version, s.SafetyStock = r.SKU, r.Version, r.SafetyStock
	if r.SafetyLocation != "" {
		s.SafetyStock, s.LocationSafety = 0, map[string]int64{r.SafetyLocation: r.SafetyStock}
	}
	for _, lot := range r.Lots {
		if i := slices.IndexFunc(s.Lots, func(l stock.Lot) bool { return l.LotID == lot.LotID }); i >= 0 {
			s.Lots[i] = lot
			continue
		}
		s.Lots = append(s.Lots, lot)
	}
	slices.SortFunc(s.Lots, func(a, b stock.Lot) int { return cmp.Compare(a.LotID, b.LotID) })
	if r.Transfer != nil {
		// A transfer's operation says the transfer as it left it: persisted with the lots.
		s.Transfers = append(s.Transfers, *r.Transfer)
	}
	// The waiting lines the operation changed, as it left them (Want 0: gone): a later
	// operation at the same version says a line's newer state.
	for _, e := range r.Queue {
		if i := slices.IndexFunc(s.Queue, func(q event.QueueEntry) bool { return q.Holder == e.Holder && q.Line == e.Line }); i >= 0 {
			s.Queue[i] = e
			continue
		}
		s.Queue = append(s.Queue, e)
	}
	t.skus[k] = s
}

// apply records an operation that the event may have to undo.
func (t *txn) apply(r stock.Result) {
	t.record(r)
	if len(r.Moves) > 0 {
		t.done = append(t.done, r)
	}
}

// rollback undoes the event's operations, newest first, each by an op id of its own (its
// op id and "-undo", see undoOpID), so a re-run of the step gets the same answers. It returns the
// reason the event is rejected with: reason, or ReasonUndoRefused when the ledger
// refused an undo. A refused undo is not retried (the ledger remembers the refusal under
// its op id, so a re-run would meet it again); the other undos still run.
func (t *txn) rollback(reason string) (string, error) {
	for i := len(t.done) - 1; i >= 0; i-- {
		op := t.done[i]
		q, err := undoOf(op)
		if err != nil {
			return "", err
		}
		q.Holder = t.holder()
		r, err := t.l.Apply(t.ctx, q)
		if err != nil {
			if _, ok := rejectable(err); !ok {
				return "", fmt.Errorf("order: undo %s: %w", op.OpID, err)
			}
			t.refusals = append(t.refusals, fmt.Sprintf("undo of %s (lots %v) refused: %v", op.OpID, movedLots(op.Moves), err))
			reason = ReasonUndoRefused
			continue
		}
		t.record(r)
	}
	t.done = nil
	return reason, nil
}

// undoOf is the one ledger operation that moves op's moves back: its last moves' buckets
// are From -> To, and Lots the moves between them; moves the other way (a change's
// releases, before its allocations) are Back, moved back after Lots.
func undoOf(op stock.Result) (stock.UndoRequest, error) {
	last := op.Moves[len(op.Moves)-1]
	q := stock.UndoRequest{OpID: undoOpID(op.OpID), SKU: op.SKU, From: last.From, To: last.To}
	if op.LegacyOpID != "" {
		q.LegacyOpID = undoOpID(op.LegacyOpID)
	}
	for _, m := range op.Moves {
		lq := stock.LotQty{LotID: m.LotID, Qty: m.Qty}
		switch {
		case m.From == q.From && m.To == q.To:
			q.Lots = append(q.Lots, lq)
		case m.From == q.To && m.To == q.From:
			q.Back = append(q.Back, lq)
		default:
			return q, fmt.Errorf("order: undo %s: moves between more than two buckets", op.OpID)
		}
	}
	return q, nil
}

// rejectable tells a ledger error that rejects the event from a transient one.
func rejectable(err error) (string, bool) {
	return stock.Rejection(err)
}

// keep records a ledger operation's result; an error that rejects the event becomes
// its reason, any other error is returned (transient: nothing is committed).
func (t *txn) keep(r stock.Result, err error) (string, error) {
	if err != nil {
		if reason, ok := rejectable(err); ok {
			t.refusals = append(t.refusals, err.Error())
			return reason, nil
		}
		return "", err
	}
	t.apply(r)
	return "", nil
}

func bucketOf(allocation string) string {
	if allocation == "allocated" {
		return stock.Allocated
	}
	return stock.Reserved
}

func modeOf(allocation string) stock.Mode {
	if allocation == "allocated" {
		return stock.ModeShip
	}
	return stock.ModeReserve
}

// allocateLines allocates every line, or answers the reason the first line that could
// not be allocated was refused (apply then undoes the lines allocated before it).
func (t *txn) allocateLines(lines []event.Line, date string, mode stock.Mode, step string, route *stock.Route) ([][]stock.LotQty, string, error) {
	held := make([][]stock.LotQty, len(lines))
	for i, ln := range lines {
		lots, reason, err := t.allocateLine(ln, date, mode, step, route, nil)
		if err != nil || reason != "" {
			return nil, reason, err
		}
		held[i] = lots
	}
	return held, "", nil
}

// allocateLine allocates one line by route, with its SKU's plan of plans (fewest_splits)
// when there is one, and returns the lots it took or the reason it was refused.
func (t *txn) allocateLine(ln event.Line, date string, mode stock.Mode, step string, route *stock.Route, plans map[string][]string) ([]stock.LotQty, string, error) {
	r := route
	if plan := plans[ln.SKU]; len(plan) > 0 {
		planned := *route
		planned.Plan = plan
		r = &planned
	}
	res, err := t.l.Apply(t.ctx, stock.AllocateRequest{
		OpID: t.opID(ln.LineID, step), LegacyOpID: t.legacyOpID(ln.LineID, step), SKU: ln.SKU, Qty: ln.Qty, TargetDate: date, Mode: mode, Holder: t.holder(),
		Route: r,
	})
	if reason, err := t.keep(res, err); err != nil || reason != "" {
		return nil, reason, err
	}
	return lotsOf(res), "", nil
}

// movedLots are the lots and quantities of moves.
func movedLots(moves []stock.Move) []stock.LotQty {
	var out []stock.LotQty
	for _, m := range moves {
		out = append(out, stock.LotQty{LotID: m.LotID, Qty: m.Qty})
	}
	return out
}

// lotsOf are the lots an allocation took, with their locations (the result's lots say
// them).
func lotsOf(r stock.Result) []stock.LotQty {
	var out []stock.LotQty
	for _, m := range r.Moves {
		out = append(out, stock.LotQty{LotID: m.LotID, Qty: m.Qty, Location: locationIn(r, m.LotID)})
	}
	return out
}

// locationIn is lot's location as r's lots say it ("" for the default).
func locationIn(r stock.Result, lot string) string {
	for _, l := range r.Lots {
		if l.LotID == lot {
			return l.Location
		}
	}
	return ""
}

// placedLines allocates an order.placed's lines by its route, or answers why not (a
// pickup at a location the shop lacks, the first line's refusal).
func (t *txn) placedLines(d *event.OrderData) ([][]stock.LotQty, string, error) {
	if reason, err := t.unknownLocation(d.PickupLocation); err != nil || reason != "" {
		return nil, reason, err
	}
	route, err := t.route(d.Routing())
	if err != nil {
		return nil, "", err
	}
	if route != nil && slices.Contains(route.Strategies, stock.StrategyFewestSplits) {
		return t.allocatePlanned(d.Lines, d.TargetDate, d.Mode, route)
	}
	return t.allocateLines(d.Lines, d.TargetDate, d.Mode, "alloc", route)
}

func (t *txn) placed(cur *event.OrderSnapshot, d *event.OrderData) (transition, error) {
	if cur != nil {
		return rejected(ReasonOrderExists)
	}
	o := &event.OrderSnapshot{LCID: t.ev.LCID, Mode: d.Mode, TargetDate: d.TargetDate}
	hold, refusal := t.placedHold(d)
	var (
		held   [][]stock.LotQty
		reason string
		err    error
	)
	if refusal != "" {
		t.refusals = append(t.refusals, refusal)
		reason = ReasonInvalidHold
	} else if held, reason, err = t.placedLines(d); err != nil {
		return transition{}, err
	}
	if reason != "" {
		o.Status = event.StatusRejected
		for _, ln := range d.Lines {
			o.Lines = append(o.Lines, event.SnapshotLine{LineID: ln.LineID, SKU: ln.SKU, Qty: ln.Qty})
		}
		return transition{next: o, reason: reason}, nil
	}
	o.Status = event.StatusPlaced
	o.HoldUntil = hold
	o.Route = d.Routing()
	o.Allocation = "reserved"
	if d.Mode == stock.ModeShip {
		o.Allocation = "allocated"
	}
	for i, ln := range d.Lines {
		o.Lines = append(o.Lines, event.SnapshotLine{LineID: ln.LineID, SKU: ln.SKU, Qty: ln.Qty, Lots: held[i]})
	}
	return transition{next: o}, nil
}

// finished answers an event on an order that is no longer placed: a repeat of what
// already happened is a no-op, anything else is an invalid transition.
func finished(cur *event.OrderSnapshot, repeat string) (string, bool) {
	if cur.Status == event.StatusPlaced {
		return "", false
	}
	if cur.Status == repeat {
		return "", true
	}
	return ReasonInvalidTransition, true
}

func paymentConfirmed(cur *event.OrderSnapshot) transition {
	if cur == nil {
		return transition{park: true}
	}
	if reason, expired := needsReservation(cur); expired {
		return transition{reason: reason}
	}
	if reason, done := finished(cur, ""); done {
		return transition{reason: reason}
	}
	o := clone(cur)
	o.Paid = true
	o.HoldUntil = nil // a paid order's reservation no longer expires
	return transition{next: o}
}

func (t *txn) allocateForShipment(cur *event.OrderSnapshot) (transition, error) {
	if cur == nil {
		return transition{park: true}, nil
	}
	if reason, expired := needsReservation(cur); expired {
		return transition{reason: reason}, nil
	}
	if reason, done := finished(cur, ""); done {
		return transition{reason: reason}, nil
	}
	if cur.Allocation == "allocated" {
		return transition{}, nil
	}
	for _, ln := range cur.Lines {
		if reason, err := t.keep(t.l.Apply(t.ctx, stock.ConfirmRequest{OpID: t.opID(ln.LineID, "confirm"), LegacyOpID: t.legacyOpID(ln.LineID, "confirm"), SKU: ln.SKU, Lots: ln.Lots, Holder: t.holder()})); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
	}
	o := clone(cur)
	o.Allocation = "allocated"
	o.HoldUntil = nil // allocated for shipment: the units are the order's until it ships or is cancelled
	return transition{next: o}, nil
}

// skuChange is what an order.lines_changed does to one SKU: the units its lowered and
// removed lines give back, and the raised and new lines' additional quantities.
type skuChange struct {
	sku     string
	release []stock.LotQty
	grow    []event.Line // line id and the quantity it needs more
}

// linesChanged makes the order's lines the event's. Each SKU's lines change in one ledger
// operation (Change) that releases what its lowered and removed lines give back (from the
// end of each line's lots, splitLots) and then allocates its raised and new lines in the
// event's order, so a unit one line gives back may serve another, and a SKU whose raises do not fit changes not at all.
// SKUs whose lines grow go first, the SKUs that only release after them: when a SKU
// refuses, apply undoes the SKUs changed before it, and no release but a growing SKU's has
// been seen by other orders by then.
func (t *txn) linesChanged(cur *event.OrderSnapshot, d *event.OrderData) (transition, error) {
	if holdSet(d.Hold) {
		return t.invalidHold("order.lines_changed takes no hold (order.reservation_extended moves it)")
	}
	if cur == nil {
		return transition{park: true}, nil
	}
	if reason, expired := needsReservation(cur); expired {
		return rejected(reason)
	}
	if reason, done := finished(cur, ""); done {
		return transition{reason: reason}, nil
	}
	changes, kept := planChanges(cur.Lines, d.Lines)
	grown := map[string][]stock.LotQty{}
	for _, c := range changes {
		qty := make([]int64, len(c.grow))
		for i, ln := range c.grow {
			qty[i] = ln.Qty
		}
		var route *stock.Route
		if len(qty) > 0 { // a change that only gives back takes from nowhere
			var err error
			if route, err = t.route(cur.Route); err != nil {
				return transition{}, err
			}
		}
		r, err := t.l.Apply(t.ctx, stock.ChangeRequest{
			OpID: t.opID(c.sku, "change"), LegacyOpID: t.legacyOpID(c.sku, "change"), SKU: c.sku, TargetDate: cur.TargetDate, Mode: modeOf(cur.Allocation),
			Release: c.release, Allocate: qty, Holder: t.holder(), Route: route,
		})
		if reason, err := t.keep(r, err); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
		held, err := allocations(r, len(c.release), qty)
		if err != nil {
			return transition{}, err
		}
		for i, ln := range c.grow {
			grown[ln.LineID] = held[i]
		}
	}
	o := clone(cur)
	o.Lines = nil
	for _, ln := range d.Lines {
		o.Lines = append(o.Lines, event.SnapshotLine{LineID: ln.LineID, SKU: ln.SKU, Qty: ln.Qty,
			Lots: mergeLots(kept[ln.LineID], grown[ln.LineID])})
	}
	return transition{next: o}, nil
}

// planChanges groups the change from old to next lines by SKU, growing SKUs first, each
// in order of first appearance (next lines, then old ones). kept are the lots each next
// line keeps of its old line (same line id and SKU).
func planChanges(old []event.SnapshotLine, next []event.Line) ([]*skuChange, map[string][]stock.LotQty) {
	bySKU := map[string]*skuChange{}
	var skus []string
	of := func(sku string) *skuChange {
		c := bySKU[sku]
		if c == nil {
			c = &skuChange{sku: sku}
			bySKU[sku] = c
			skus = append(skus, sku)
		}
		return c
	}
	for _, ln := range next {
		of(ln.SKU)
	}
	for _, ol := range old {
		of(ol.SKU)
	}
	want := map[string]event.Line{}
	for _, ln := range next {
		want[ln.LineID] = ln
	}
	kept := map[string][]stock.LotQty{}
	was := map[string]event.SnapshotLine{}
	for _, ol := range old {
		was[ol.LineID] = ol
		keep := int64(0)
		if ln, ok := want[ol.LineID]; ok && ln.SKU == ol.SKU {
			keep = ln.Qty
		}
		if keep >= ol.Qty {
			kept[ol.LineID] = ol.Lots
			continue
		}
		k, give := splitLots(ol.Lots, keep)
		kept[ol.LineID] = k
		c := of(ol.SKU)
		c.release = append(c.release, give...)
	}
	for _, ln := range next {
		o, ok := was[ln.LineID]
		switch {
		case !ok || o.SKU != ln.SKU:
			of(ln.SKU).grow = append(of(ln.SKU).grow, ln)
		case ln.Qty > o.Qty:
			of(ln.SKU).grow = append(of(ln.SKU).grow, event.Line{LineID: ln.LineID, SKU: ln.SKU, Qty: ln.Qty - o.Qty})
		}
	}
	var growing, releasing []*skuChange
	for _, sku := range skus {
		switch c := bySKU[sku]; {
		case len(c.grow) > 0:
			growing = append(growing, c)
		case len(c.release) > 0:
			releasing = append(releasing, c)
		}
	}
	return append(growing, releasing...), kept
}

// allocations splits a change's result into the lots each allocation took: its moves are
// the nrelease releases', then each allocation's in turn, which sum to its quantity.
func allocations(r stock.Result, nrelease int, qty []int64) ([][]stock.LotQty, error) {
	held := make([][]stock.LotQty, len(qty))
	moves := r.Moves[min(nrelease, len(r.Moves)):]
	for i, q := range qty {
		for q > 0 && len(moves) > 0 {
			m := moves[0]
			moves = moves[1:]
			held[i] = append(held[i], stock.LotQty{LotID: m.LotID, Qty: m.Qty, Location: locationIn(r, m.LotID)})
			q -= m.Qty
		}
		if q != 0 {
			return nil, fmt.Errorf("order: change %s: the moves do not match its allocations", r.OpID)
		}
	}
	return held, nil
}

// splitLots keeps the first want units of a line's lots and gives back the rest, from the
// end of the list first. A line lists its lots in the order it first took them (mergeLots
// keeps a lot taken again in its place), so a line that took a lot twice gives back the
// lot after it before those units (docs/events.md, "Which units go back").
func splitLots(lots []stock.LotQty, want int64) (keep, give []stock.LotQty) {
	for _, lq := range lots {
		switch {
		case want >= lq.Qty:
			keep = append(keep, lq)
			want -= lq.Qty
		case want > 0:
			keep = append(keep, stock.LotQty{LotID: lq.LotID, Qty: want, Location: lq.Location})
			give = append(give, stock.LotQty{LotID: lq.LotID, Qty: lq.Qty - want, Location: lq.Location})
			want = 0
		default:
			give = append(give, lq)
		}
	}
	slices.Reverse(give)
	return keep, give
}

// mergeLots appends b's lots to a line's lots a: a lot a lists already keeps its place,
// its quantity added.
func mergeLots(a, b []stock.LotQty) []stock.LotQty {
	out := slices.Clone(a)
	for _, lq := range b {
		if i := slices.IndexFunc(out, func(x stock.LotQty) bool { return x.LotID == lq.LotID }); i >= 0 {
			out[i].Qty += lq.Qty
			continue
		}
		out = append(out, lq)
	}
	return out
}

func (t *txn) cancelled(cur *event.OrderSnapshot) (transition, error) {
	if cur == nil {
		return transition{park: true}, nil
	}
	if cur.Status == event.StatusExpired {
		return transition{}, nil // its reservation was released already: nothing left to cancel
	}
	if reason, done := finished(cur, event.StatusCancelled); done {
		return transition{reason: reason}, nil
	}
	from := bucketOf(cur.Allocation)
	for _, ln := range cur.Lines {
		if len(ln.Lots) == 0 {
			continue
		}
		lots := slices.Clone(ln.Lots)
		slices.Reverse(lots)
		if reason, err := t.keep(t.l.Apply(t.ctx, stock.ReleaseRequest{OpID: t.opID(ln.LineID, "cancel"), LegacyOpID: t.legacyOpID(ln.LineID, "cancel"), SKU: ln.SKU, From: from, Lots: lots, Holder: t.holder()})); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
	}
	o := clone(cur)
	o.Status = event.StatusCancelled
	o.HoldUntil = nil
	for i := range o.Lines {
		o.Lines[i].Lots = nil
	}
	return transition{next: o}, nil
}

func (t *txn) shipped(cur *event.OrderSnapshot) (transition, error) {
	if cur == nil {
		return transition{park: true}, nil
	}
	if reason, expired := needsReservation(cur); expired {
		return transition{reason: reason}, nil
	}
	if reason, done := finished(cur, event.StatusShipped); done {
		return transition{reason: reason}, nil
	}
	if !cur.Paid || cur.Allocation != "allocated" {
		return transition{park: true}, nil
	}
	for _, ln := range cur.Lines {
		if reason, err := t.keep(t.l.Apply(t.ctx, stock.ShipRequest{OpID: t.opID(ln.LineID, "ship"), LegacyOpID: t.legacyOpID(ln.LineID, "ship"), SKU: ln.SKU, Lots: ln.Lots, Holder: t.holder()})); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
	}
	o := clone(cur)
	o.Status = event.StatusShipped
	return transition{next: o}, nil
}

// allocationMoved moves a placed order's line to one location: one ledger operation on its
// SKU (MoveAllocation) gives back the units the line holds at other locations and
// allocates the same quantity, in the same bucket, at the destination alone, or moves
// nothing (ERR_SHORTAGE naming the location). The line keeps its units at the destination
// and adds the new ones (mergeLots). The operation's op id names the destination after
// event.OwnMark ("move~<location>"), a step no sender's line id can make.
func (t *txn) allocationMoved(cur *event.OrderSnapshot, d *event.AllocationMovedData) (transition, error) {
	if cur == nil {
		return transition{park: true}, nil
	}
	if reason, expired := needsReservation(cur); expired {
		return rejected(reason)
	}
	if cur.Status != event.StatusPlaced {
		t.refusals = append(t.refusals, fmt.Sprintf("the order is %s: its allocation cannot move", cur.Status))
		return rejected(ReasonInvalidTransition)
	}
	i := slices.IndexFunc(cur.Lines, func(l event.SnapshotLine) bool { return l.LineID == d.LineID })
	if i < 0 {
		t.refusals = append(t.refusals, fmt.Sprintf("line %s is not a line of the order", d.LineID))
		return rejected(ReasonUnknownLine)
	}
	ln := cur.Lines[i]
	var stay, give []stock.LotQty
	for _, lq := range ln.Lots {
		if cmp.Or(lq.Location, stock.DefaultLocation) == d.ToLocation {
			stay = append(stay, lq)
		} else {
			give = append(give, lq)
		}
	}
	if len(give) == 0 {
		t.refusals = append(t.refusals, fmt.Sprintf("line %s holds units at %s only", d.LineID, d.ToLocation))
		return rejected(ReasonAlreadyAtLocation)
	}
	if ok, err := t.locationEnabled(d.ToLocation); err != nil || !ok {
		if err == nil {
			t.refusals = append(t.refusals, fmt.Sprintf("location %s is not an enabled location of the shop", d.ToLocation))
		}
		return transition{reason: ReasonLocationUnavailable}, err
	}
	slices.Reverse(give) // the last allocated first, as every give-back
	r, err := t.l.Apply(t.ctx, stock.MoveAllocationRequest{
		OpID: t.opID(ln.LineID, "move"+event.OwnMark+d.ToLocation), SKU: ln.SKU, TargetDate: cur.TargetDate,
		Mode: modeOf(cur.Allocation), Release: give, To: d.ToLocation, Holder: t.holder(),
	})
	if reason, err := t.keep(r, err); err != nil || reason != "" {
		return transition{reason: reason}, err
	}
	o := clone(cur)
	o.Lines[i].Lots = mergeLots(stay, lotsOf(stock.Result{Moves: r.Moves[len(give):], Lots: r.Lots}))
	return transition{next: o}, nil
}

// locationEnabled reports whether the shop has location id enabled (without locations
// registered, only the default location, which is), read anew before saying no so that
// a location just registered or enabled is known whatever the cache's age.
func (t *txn) locationEnabled(id string) (bool, error) {
	for _, fresh := range []bool{false, true} {
		s, err := t.shop(fresh)
		if err != nil {
			return false, err
		}
		if slices.ContainsFunc(s.All, func(l stock.Location) bool { return l.ID == id && l.Enabled }) {
			return true, nil
		}
	}
	return false, nil
}

// The SKU's own events: each runs one ledger operation, named after the entity it acts on
// (the SKU or the lot), and changes no order.

func (t *txn) warehouseOp(op stock.Op) (transition, error) {
	reason, err := t.keep(t.l.Apply(t.ctx, op))
	return transition{reason: reason}, err
}

func (t *txn) received(d *event.InventoryReceivedData) (transition, error) {
	return t.atKnownLocation(d.Location, stock.ReceiveRequest{OpID: t.opID(d.LotID, "receive"), SKU: d.SKU, LotID: d.LotID, BestBefore: d.BestBefore, Qty: d.Qty, Location: d.Location})
}

// namedLot is the lot an event names: lot itself, or with a transfer id the transit lot
// that transfer made for lot, named as the ledger names it (stock.TransitLotID).
func namedLot(transferID, lot string) string {
	if transferID == "" {
		return lot
	}
	return stock.TransitLotID(transferID, lot)
}

func (t *txn) adjusted(d *event.InventoryAdjustedData) (transition, error) {
	lot := namedLot(d.TransferID, d.LotID)
	return t.atKnownLocation(d.Location, stock.AdjustRequest{OpID: t.opID(lot, "adjust"), SKU: d.SKU, LotID: lot, Delta: d.Delta, Reason: d.Reason, Location: d.Location})
}

func (t *txn) registerSKU(d *event.SKURegisteredData) (transition, error) {
	return t.warehouseOp(stock.RegisterSKURequest{OpID: t.opID(d.SKU, "register"), SKU: d.SKU, SafetyStock: d.SafetyStock})
}

// setSafetyStock sets the SKU's network-wide safety stock, or a location's: its op id
// then names the location after event.OwnMark ("safety_stock~<location>"), a step no
// sender can name, so the same event id cannot set two locations under one op.
func (t *txn) setSafetyStock(d *event.SafetyStockChangedData) (transition, error) {
	step := "safety_stock"
	if d.Location != "" {
		step += event.OwnMark + d.Location
	}
	return t.atKnownLocation(d.Location, stock.SafetyStockRequest{OpID: t.opID(d.SKU, step), SKU: d.SKU, SafetyStock: d.SafetyStock, Location: d.Location})
}

func (t *txn) registerLot(d *event.LotRegisteredData) (transition, error) {
	good := d.Good == nil || *d.Good
	return t.atKnownLocation(d.Location, stock.RegisterLotRequest{OpID: t.opID(d.LotID, "register"), SKU: d.SKU, Lot: stock.NewLot{
		LotID: d.LotID, Kind: d.Kind, Good: good, BestBefore: d.BestBefore, ArrivesAt: d.ArrivesAt,
		ValidFrom: d.ValidFrom, ValidTo: d.ValidTo, Sellable: d.Sellable, Location: d.Location,
	}})
}

func (t *txn) hold(d *event.LotQtyData) (transition, error) {
	lot := namedLot(d.TransferID, d.LotID)
	return t.atKnownLocation(d.Location, stock.HoldRequest{OpID: t.opID(lot, "hold"), SKU: d.SKU, LotID: lot, Qty: d.Qty, Reason: d.Reason, Location: d.Location})
}

func (t *txn) releaseHold(d *event.LotQtyData) (transition, error) {
	lot := namedLot(d.TransferID, d.LotID)
	return t.atKnownLocation(d.Location, stock.ReleaseHoldRequest{OpID: t.opID(lot, "release_hold"), SKU: d.SKU, LotID: lot, Qty: d.Qty, Reason: d.Reason, Location: d.Location})
}

func (t *txn) damage(d *event.LotQtyData) (transition, error) {
	lot := namedLot(d.TransferID, d.LotID)
	return t.atKnownLocation(d.Location, stock.DamageRequest{OpID: t.opID(lot, "damage"), SKU: d.SKU, LotID: lot, Qty: d.Qty, Reason: d.Reason, Location: d.Location})
}

// recall also reports the orders that hold the lot.
func (t *txn) recall(d *event.LotRecalledData) (transition, error) {
	if reason, err := t.unknownLocation(d.Location); err != nil || reason != "" {
		return transition{reason: reason}, err
	}
	lot := namedLot(d.TransferID, d.LotID)
	r, err := t.l.Apply(t.ctx, stock.RecallRequest{OpID: t.opID(lot, "recall"), SKU: d.SKU, LotID: lot, Reason: d.Reason, Location: d.Location})
	t.holders, t.holderCount = r.Holders, r.HolderCount
	reason, err := t.keep(r, err)
	return transition{reason: reason}, err
}

// A transfer's events each run one ledger operation on the SKU, named after the transfer.

// transferRequested refuses a transfer from or to a location the shop has not
// registered (ReasonUnknownLocation), as any lot named at one: its transit lots would be
// lots at an unknown location.
func (t *txn) transferRequested(d *event.TransferRequestedData) (transition, error) {
	for _, l := range []string{d.FromLocation, d.ToLocation} {
		if reason, err := t.unknownLocation(l); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
	}
	return t.warehouseOp(stock.TransferRequest{OpID: t.opID(d.TransferID, "transfer"), SKU: d.SKU, TransferID: d.TransferID,
		From: d.FromLocation, To: d.ToLocation, Qty: d.Qty, ArrivesAt: d.ArrivesAt})
}

func (t *txn) transferReceived(d *event.TransferReceivedData) (transition, error) {
	return t.warehouseOp(stock.TransferReceiveRequest{OpID: t.opID(d.TransferID, "transfer_receive"), SKU: d.SKU, TransferID: d.TransferID, Qty: d.Qty})
}

func (t *txn) transferCancelled(d *event.TransferCancelledData) (transition, error) {
	return t.warehouseOp(stock.TransferCancelRequest{OpID: t.opID(d.TransferID, "transfer_cancel"), SKU: d.SKU, TransferID: d.TransferID})
}

// returned brings back units of a shipped order's lines: per line, from the lots it
// shipped from, last allocated first, never more than a lot shipped and has not had
// back. A return before the shipment waits (parked) for it.
func (t *txn) returned(cur *event.OrderSnapshot, d *event.ReturnedData) (transition, error) {
	if cur == nil || cur.Status == event.StatusPlaced {
		return transition{park: true}, nil
	}
	if cur.Status != event.StatusShipped {
		return rejected(ReasonInvalidTransition)
	}
	o := clone(cur)
	for _, rl := range d.Lines {
		i := slices.IndexFunc(o.Lines, func(l event.SnapshotLine) bool { return l.LineID == rl.LineID })
		if i < 0 {
			t.refusals = append(t.refusals, fmt.Sprintf("line %s is not a line of the order", rl.LineID))
			return rejected(ReasonUnknownLine)
		}
		ln := &o.Lines[i]
		back := returnable(ln.Lots, ln.Returned, rl.Qty)
		if back == nil {
			t.refusals = append(t.refusals, fmt.Sprintf("line %s: %d returned of %d shipped, %d more asked", rl.LineID, sumLots(ln.Returned), sumLots(ln.Lots), rl.Qty))
			return rejected(ReasonReturnExceedsShipped)
		}
		r, err := t.l.Apply(t.ctx, stock.ReturnRequest{OpID: t.opID(rl.LineID, "return"), LegacyOpID: t.legacyOpID(rl.LineID, "return"), SKU: ln.SKU, Lots: back, Defective: d.Defective})
		if reason, err := t.keep(r, err); err != nil || reason != "" {
			return transition{reason: reason}, err
		}
		ln.Returned = mergeLots(ln.Returned, back)
	}
	return transition{next: o}, nil
}

// returnable picks qty units to return from a line's shipped lots, from the end of the
// list first (as splitLots), leaving what each lot had back already; nil when fewer than qty are left.
func returnable(shipped, returned []stock.LotQty, qty int64) []stock.LotQty {
	had := map[string]int64{}
	for _, r := range returned {
		had[r.LotID] += r.Qty
	}
	var out []stock.LotQty
	for i := len(shipped) - 1; i >= 0 && qty > 0; i-- {
		lq := shipped[i]
		left := lq.Qty - had[lq.LotID] // a line holds each lot once (mergeLots)
		if left <= 0 {
			continue
		}
		take := min(left, qty)
		out = append(out, stock.LotQty{LotID: lq.LotID, Qty: take, Location: lq.Location})
		qty -= take
	}
	if qty > 0 {
		return nil
	}
	return out
}

func sumLots(lots []stock.LotQty) int64 {
	var n int64
	for _, l := range lots {
		n += l.Qty
	}
	return n
}

func clone(o *event.OrderSnapshot) *event.OrderSnapshot {
	c := *o
	c.Lines = make([]event.SnapshotLine, len(o.Lines))
	for i, ln := range o.Lines {
		ln.Lots = slices.Clone(ln.Lots)
		ln.Returned = slices.Clone(ln.Returned)
		c.Lines[i] = ln
	}
	return &c
}
