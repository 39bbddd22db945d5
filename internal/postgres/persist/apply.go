package persist

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/outbound"
)

// ErrInvalid marks a result that can never be applied: it breaks the schema (a missing
// or over-long id, a bad date, a negative bucket, a CHECK constraint). Retrying it cannot
// help.
var ErrInvalid = errors.New("persist: invalid result")

// Status is what Apply did with one result.
type Status int

const (
	// Unapplied: nothing of the result was committed (Apply returned an error).
	Unapplied Status = iota
	// Applied: the result is now in the inbox, and its rows were written where newer.
	Applied
	// Duplicate: the inbox already held the result (or the batch held it twice); nothing
	// of it was written again.
	Duplicate
	// Poison: the result can never be applied (ErrInvalid); the rest of its batch committed.
	Poison
	// Conflict: the inbox holds another result under the same entity and event id
	// (ErrConflict); nothing of this one was written.
	Conflict
)

// ErrConflict marks a result whose entity and event id the inbox holds with another
// body: not a redelivery, and nothing of it is written.
var ErrConflict = errors.New("persist: conflict: the inbox holds another result of this entity and event id")

// MoveConflict is a move of an applied result that was not recorded: moves holds a move
// under its key (SKU, op id, index) for another result (entity, event id), or with other
// content. Two entities' results sharing a ledger operation means the ledger answered the
// second with the first one's operation: the second entity holds nothing by it.
type MoveConflict struct {
	// Move is the move not recorded, Stored the one moves holds (or the one recorded
	// first in the same batch).
	Move, Stored MoveRow
}

func (c MoveConflict) Error() string {
	m, s := c.Move, c.Stored
	return fmt.Sprintf("persist: move sku %.*q op %.*q index %d of entity %.*q event %.*q not recorded: moves holds it for entity %.*q event %.*q%s",
		event.MaxIDLength, m.SKU, event.MaxIDLength, m.OpID, m.Idx, maxEntityLength, m.Entity, event.MaxIDLength, m.EventID,
		maxEntityLength, s.Entity, event.MaxIDLength, s.EventID, moveDiff(s, m))
}

// moveDiff says how m differs from stored in what it moved ("" when it does not).
func moveDiff(stored, m MoveRow) string {
	what := func(r MoveRow) string {
		return fmt.Sprintf("%.*s %s->%s %d at v%d", event.MaxIDLength, r.LotID, r.FromBucket, r.ToBucket, r.Qty, r.SKUVersion)
	}
	if a, b := what(stored), what(m); a != b {
		return fmt.Sprintf(" (stored: %s; this one: %s)", a, b)
	}
	return ""
}

// sameMove is true when m is stored again: the same result's move.
func sameMove(stored, m MoveRow) bool {
	return stored.Entity == m.Entity && stored.EventID == m.EventID && moveDiff(stored, m) == ""
}

// inboxDiff says how r differs from the stored inbox row of its entity and event id (""
// when it does not: a redelivery).
func inboxDiff(stored, r InboxRow) string {
	var d []string
	if stored.Seq != r.Seq {
		d = append(d, fmt.Sprintf("seq %d, this one %d", stored.Seq, r.Seq))
	}
	if stored.Type != r.Type {
		d = append(d, fmt.Sprintf("type %.64q, this one %.64q", stored.Type, r.Type))
	}
	if stored.Outcome != r.Outcome {
		d = append(d, fmt.Sprintf("outcome %.64q, this one %.64q", stored.Outcome, r.Outcome))
	}
	if stored.Reason != r.Reason {
		d = append(d, fmt.Sprintf("reason %.64q, this one %.64q", stored.Reason, r.Reason))
	}
	return strings.Join(d, "; ")
}

func conflictError(r InboxRow, diff string) error {
	return fmt.Errorf("%w: entity %.*q event %.*q: the persisted result has %s", ErrConflict,
		maxEntityLength, r.Entity, event.MaxIDLength, r.EventID, diff)
}

// ResultReport is what Apply did with one result.
type ResultReport struct {
	Status Status
	// Err says why, for Poison; it wraps ErrInvalid.
	Err error
}

// Skips counts what Apply left alone because PostgreSQL already held it or something newer.
type Skips struct {
	// Duplicates are results already in the inbox, or twice in the batch.
	Duplicates int
	// OlderOrders are order snapshots whose seq was not newer than the stored one.
	OlderOrders int
	// OlderSKUs are SKU rows whose version was not newer than the stored one, nor their
	// settings version (results that set the safety stock).
	OlderSKUs int
	// OlderLots are lot rows whose SKU version was not newer than the stored one.
	OlderLots int
	// OlderTransfers are transfer rows whose SKU version was not newer than the stored one.
	OlderTransfers int
	// OlderBackorders are waiting lines' rows whose SKU version was not newer than the
	// stored one.
	OlderBackorders int
	// DuplicateMoves are moves whose (op_id, idx) was already recorded.
	DuplicateMoves int
}

func (s *Skips) add(o Skips) {
	s.Duplicates += o.Duplicates
	s.OlderOrders += o.OlderOrders
	s.OlderSKUs += o.OlderSKUs
	s.OlderLots += o.OlderLots
	s.OlderTransfers += o.OlderTransfers
	s.OlderBackorders += o.OlderBackorders
	s.DuplicateMoves += o.DuplicateMoves
}

// Report says what Apply did with a batch.
type Report struct {
	// Results has one entry per result, in the batch's order.
	Results []ResultReport
	Skips   Skips
	// Isolated is true when a poison result made Apply redo the batch one result per
	// savepoint.
	Isolated bool
	// MoveConflicts are moves of applied results that were not recorded.
	MoveConflicts []MoveConflict
	// Outbound counts the outbox rows written (WithOutbound).
	Outbound int
}

// Option changes what Apply writes.
type Option func(*options)

type options struct {
	outbound *outbound.Writer
}

// WithOutbound makes Apply write the outbound events of the batch's freshly applied results
// into the outbox, in the batch's transaction (outbound.Writer.Write); nil writes none.
func WithOutbound(w *outbound.Writer) Option {
	return func(o *options) { o.outbound = w }
}

// Count returns how many results have status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, rr := range r.Results {
		if rr.Status == s {
			n++
		}
	}
	return n
}

// Apply writes a batch of results to PostgreSQL in one transaction: the inbox rows, the
// order rows whose seq is newer, the SKU and lot rows whose version is newer, the safety
// stock of the results that set it where its settings version is newer, and the moves
// not recorded yet. A result already in the inbox is skipped entirely.
//
// A result that can never be applied does not sink the batch: Apply first writes the
// whole batch with one statement per table; if PostgreSQL refuses data (SQLSTATE class
// 22, 23 or 54), it rolls back and redoes the batch with a savepoint per result, reports
// that result as Poison and commits the others. Any other error (PostgreSQL unreachable,
// a deadlock, a serialization failure) is returned and nothing is committed: the caller
// retries the whole batch later; the report then marks every result Unapplied but those
// refused before PostgreSQL was asked (Poison).
//
// WithOutbound adds the outbound events of the results newly inserted into the inbox, in
// the same transaction (in the savepoint of each result kept, when isolating a poison one):
// they commit with the batch, or not at all.
func Apply(ctx context.Context, db *gorm.DB, results []event.Result, opts ...Option) (Report, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	rep := Report{Results: make([]ResultReport, len(results))}
	batch := make([]prepared, 0, len(results))
	for i, r := range results {
		p, err := prepare(i, r)
		if err != nil {
			rep.Results[i] = ResultReport{Status: Poison, Err: err}
			continue
		}
		batch = append(batch, p)
	}
	if len(batch) == 0 {
		return rep, nil
	}

	var w written
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if w, err = write(tx, batch); err != nil {
			return err
		}
		w.outbound, err = o.writeOutbound(tx, results, batch, w.fresh)
		return err
	})
	if err != nil && isPoison(err) {
		// Some result breaks the schema: find it, one savepoint per result.
		rep.Isolated = true
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			w = written{}
			for _, p := range batch {
				if err := tx.SavePoint("result").Error; err != nil {
					return err
				}
				one, err := write(tx, []prepared{p})
				if err == nil {
					one.outbound, err = o.writeOutbound(tx, results, []prepared{p}, one.fresh)
				}
				if err == nil {
					if err := tx.Exec("RELEASE SAVEPOINT result").Error; err != nil {
						return err
					}
					w.add(one)
					continue
				}
				if !isPoison(err) {
					return err
				}
				if err := tx.RollbackTo("result").Error; err != nil {
					return err
				}
				rep.Results[p.index] = ResultReport{Status: Poison, Err: fmt.Errorf("%w: event %s: %w", ErrInvalid, p.inbox.EventID, err)}
			}
			return nil
		})
	}
	if err != nil {
		// Nothing committed: only the results refused before PostgreSQL was asked stay Poison.
		for _, p := range batch {
			rep.Results[p.index] = ResultReport{}
		}
		return rep, fmt.Errorf("persist: apply batch of %d: %w", len(results), err)
	}
	for _, p := range batch {
		if rep.Results[p.index].Status == Poison {
			continue
		}
		if err := w.conflicts[p.index]; err != nil {
			rep.Results[p.index] = ResultReport{Status: Conflict, Err: err}
		} else if w.fresh[p.index] {
			rep.Results[p.index] = ResultReport{Status: Applied}
		} else {
			rep.Results[p.index] = ResultReport{Status: Duplicate}
		}
	}
	rep.Skips, rep.MoveConflicts, rep.Outbound = w.skips, w.moveConflicts, w.outbound
	return rep, nil
}

// writeOutbound writes the outbound events of batch's fresh results, in batch order.
func (o options) writeOutbound(tx *gorm.DB, results []event.Result, batch []prepared, fresh map[int]bool) (int, error) {
	if o.outbound == nil {
		return 0, nil
	}
	rs := make([]event.Result, 0, len(fresh))
	for _, p := range batch {
		if fresh[p.index] {
			rs = append(rs, results[p.index])
		}
	}
	n, err := o.outbound.Write(tx, rs)
	if err != nil {
		return 0, fmt.Errorf("outbox: %w", err)
	}
	return n, nil
}

// isPoison tells a result that PostgreSQL refuses for its content from a failure that a
// retry can cure.
func isPoison(err error) bool {
	if errors.Is(err, ErrInvalid) {
		return true
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || len(pg.Code) < 2 {
		return false
	}
	switch pg.Code[:2] {
	case "22", // data exception: bad date, out of range, invalid JSON
		"23", // integrity constraint violation: CHECK, NOT NULL, foreign key
		"54": // program limit exceeded: an index row over its size limit (a huge text)
		return true
	}
	return false
}

// prepared is one result turned into rows.
type prepared struct {
	index      int
	inbox      InboxRow
	order      *OrderRow
	skus       []SKURow
	lots       []LotRow
	transfers  []TransferRow
	backorders []BackorderRow
	moves      []MoveRow
}

func invalid(r event.Result, format string, args ...any) error {
	// An over-long event id is cut, so that it does not swell the DLQ reason and the logs.
	return fmt.Errorf("%w: event %.*q: %s", ErrInvalid, event.MaxIDLength, r.EventID, fmt.Sprintf(format, args...))
}

// reasonCode is the form of a rejected result's reason: ERR_SHORTAGE, ERR_SAFETY_STOCK, ...
var reasonCode = regexp.MustCompile(`^ERR_[A-Z0-9_]{1,60}$`)

// traceID is the form of a result's trace id: an OpenTelemetry trace id in hex.
var traceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// maxEntityLength bounds a result's entity: an lcid, or "sku:" and a SKU.
const maxEntityLength = len("sku:") + event.MaxIDLength

// tooLong refuses an id longer than limit bytes. PostgreSQL indexes every id and would
// refuse a row of a few KB (SQLSTATE 54000) only after the whole batch was sent.
func tooLong(name, id string, limit int) error {
	if len(id) > limit {
		return fmt.Errorf("%s is %d bytes, longer than %d", name, len(id), limit)
	}
	return nil
}

// prepare checks what the schema cannot (or cannot say clearly) and builds the rows.
func prepare(index int, r event.Result) (prepared, error) {
	p := prepared{index: index}
	switch {
	case r.EventID == "":
		return p, invalid(r, "no event_id")
	case r.Entity == "":
		return p, invalid(r, "no entity")
	case r.Type == "":
		return p, invalid(r, "no type")
	case r.Outcome != event.Applied && r.Outcome != event.Rejected:
		return p, invalid(r, "outcome %q is neither applied nor rejected", r.Outcome)
	case r.Outcome == event.Rejected && !reasonCode.MatchString(r.Reason):
		// The outbound order.refused tells the reason as a code consumers match on.
		return p, invalid(r, "rejected with reason %.64q, not a code ERR_...", r.Reason)
	}
	if err := cmp.Or(
		tooLong("event_id", r.EventID, event.MaxIDLength),
		tooLong("entity", r.Entity, maxEntityLength),
		tooLong("lcid", r.LCID, event.MaxIDLength),
	); err != nil {
		return p, invalid(r, "%v", err)
	}
	if r.TraceID != "" && !traceID.MatchString(r.TraceID) {
		return p, invalid(r, "trace_id %.64q is not 32 lowercase hex digits", r.TraceID)
	}
	p.inbox = InboxRow{
		EventID: r.EventID, Entity: r.Entity, Seq: r.Seq, Type: string(r.Type),
		Outcome: r.Outcome, Reason: r.Reason, ProcessedAt: r.ProcessedAt, TraceID: r.TraceID,
	}

	if o := r.Order; o != nil {
		lcid := cmp.Or(o.LCID, r.LCID)
		if lcid == "" {
			return p, invalid(r, "order snapshot without lcid")
		}
		if err := tooLong("order lcid", lcid, event.MaxIDLength); err != nil {
			return p, invalid(r, "%v", err)
		}
		td, err := optDate(o.TargetDate)
		if err != nil {
			return p, invalid(r, "order %s: target_date: %v", lcid, err)
		}
		lines := o.Lines
		if lines == nil {
			lines = []event.SnapshotLine{}
		}
		js, err := json.Marshal(lines)
		if err != nil {
			return p, invalid(r, "order %s: lines: %v", lcid, err)
		}
		var route json.RawMessage
		if o.Route != nil {
			if route, err = json.Marshal(o.Route); err != nil {
				return p, invalid(r, "order %s: route: %v", lcid, err)
			}
		}
		p.order = &OrderRow{
			LCID: lcid, Status: o.Status, Allocation: optString(o.Allocation), Paid: o.Paid,
			Mode: optString(string(o.Mode)), TargetDate: td, Lines: js, HoldUntil: holdUntil(o.HoldUntil),
			Route: route, Seq: r.Seq, LastEventID: r.EventID,
		}
	}

	// An event that touched one SKU in several operations (with other entities' operations
	// in between) lists it once per operation, each entry at its own version with the lots
	// as of then. Each lot row keeps its entry's version; writeSKUs sends only the newest
	// row per SKU and per lot, so the SKU row takes the highest.
	versions := make(map[string]int64, len(r.SKUs))
	settings := setsSettings(r)
	for _, s := range r.SKUs {
		if s.SKU == "" {
			return p, invalid(r, "sku without name")
		}
		if err := tooLong("sku", s.SKU, event.MaxIDLength); err != nil {
			return p, invalid(r, "%v", err)
		}
		versions[s.SKU] = max(versions[s.SKU], s.Version)
		row := SKURow{SKU: s.SKU, Version: s.Version}
		switch {
		case settings && s.LocationSafety != nil:
			// A location's safety stock: the SKU's network-wide one is not in the result.
			for loc, n := range s.LocationSafety {
				if err := stock.CheckLocation(loc); err != nil || n < 0 {
					return p, invalid(r, "sku %s: safety stock %d at location %q", s.SKU, n, loc)
				}
			}
			row.LocationSafety = s.LocationSafety
		case settings:
			row.SafetyStock, row.SettingsVersion = s.SafetyStock, s.Version
		}
		p.skus = append(p.skus, row)
		for _, l := range s.Lots {
			if err := tooLong("lot_id", l.LotID, event.MaxIDLength); err != nil {
				return p, invalid(r, "sku %s: %v", s.SKU, err)
			}
			row, err := lotRow(s.SKU, s.Version, l)
			if err != nil {
				return p, invalid(r, "sku %s lot %s: %v", s.SKU, l.LotID, err)
			}
			p.lots = append(p.lots, row)
		}
		for _, t := range s.Transfers {
			row, err := transferRow(s.SKU, s.Version, t)
			if err != nil {
				return p, invalid(r, "sku %s transfer %.*q: %v", s.SKU, event.MaxIDLength, t.TransferID, err)
			}
			p.transfers = append(p.transfers, row)
		}
		for _, e := range s.Queue {
			row, err := backorderRow(s.SKU, s.Version, e)
			if err != nil {
				return p, invalid(r, "sku %s queue holder %.*q line %.*q: %v", s.SKU, event.MaxIDLength, e.Holder, event.MaxIDLength, e.Line, err)
			}
			p.backorders = append(p.backorders, row)
		}
	}
	for _, m := range r.Moves {
		if m.OpID == "" || m.SKU == "" || m.LotID == "" {
			return p, invalid(r, "move %+v lacks op_id, sku or lot_id", m)
		}
		if err := cmp.Or(
			tooLong("move op_id", m.OpID, event.MaxIDLength),
			tooLong("move sku", m.SKU, event.MaxIDLength),
			tooLong("move lot_id", m.LotID, event.MaxIDLength),
		); err != nil {
			return p, invalid(r, "move %d: %v", m.Index, err)
		}
		// A move carries the version of the operation that made it; one published before
		// that field existed takes the result's version of its SKU (then one per SKU).
		p.moves = append(p.moves, MoveRow{
			OpID: m.OpID, Idx: m.Index, Entity: r.Entity, EventID: r.EventID, SKU: m.SKU, LotID: m.LotID,
			FromBucket: m.From, ToBucket: m.To, Qty: m.Qty, SKUVersion: cmp.Or(m.Version, versions[m.SKU]),
		})
	}
	return p, nil
}

// setsSettings tells a result whose SKUs carry the safety stock they set (its kind's
// SetsSafetyStock): in every other result a SKU's SafetyStock is 0 and means nothing (the
// operation did not read it back).
func setsSettings(r event.Result) bool {
	k := domain.KindOf(r.Type)
	return r.Outcome == event.Applied && k != nil && k.SetsSafetyStock
}

// transferRow is a result's transfer as a row; the table's CHECK refuses a state it does
// not know.
func transferRow(sku string, version int64, t event.Transfer) (TransferRow, error) {
	if t.TransferID == "" {
		return TransferRow{}, errors.New("no transfer_id")
	}
	if err := tooLong("transfer_id", t.TransferID, event.MaxIDLength); err != nil {
		return TransferRow{}, err
	}
	lots := t.Lots
	if lots == nil {
		lots = []event.TransferLot{}
	}
	js, err := json.Marshal(lots)
	if err != nil {
		return TransferRow{}, err
	}
	return TransferRow{SKU: sku, TransferID: t.TransferID, State: t.State, FromLocation: t.From, ToLocation: t.To,
		Lots: js, Version: version}, nil
}

// backorderRow is a result's queue entry as a row; the table's CHECKs refuse a mode, class
// or want the ledger does not make.
func backorderRow(sku string, version int64, e event.QueueEntry) (BackorderRow, error) {
	if e.Holder == "" || e.Line == "" {
		return BackorderRow{}, errors.New("no holder or line")
	}
	if err := cmp.Or(tooLong("holder", e.Holder, event.MaxIDLength), tooLong("line", e.Line, event.MaxIDLength)); err != nil {
		return BackorderRow{}, err
	}
	td, err := date(e.TargetDate)
	if err != nil {
		return BackorderRow{}, fmt.Errorf("target_date: %w", err)
	}
	return BackorderRow{SKU: sku, Holder: e.Holder, Line: e.Line, Want: e.Want, Mode: string(e.Mode), TargetDate: td,
		Class: e.Class, Seq: e.Seq, QueuedAt: e.QueuedAt, Version: version}, nil
}

func lotRow(sku string, version int64, l stock.Lot) (LotRow, error) {
	if l.LotID == "" {
		return LotRow{}, errors.New("no lot_id")
	}
	from, err := date(l.ValidFrom)
	if err != nil {
		return LotRow{}, fmt.Errorf("valid_from: %w", err)
	}
	to, err := date(l.ValidTo)
	if err != nil {
		return LotRow{}, fmt.Errorf("valid_to: %w", err)
	}
	bb, err := optDate(l.BestBefore)
	if err != nil {
		return LotRow{}, fmt.Errorf("best_before: %w", err)
	}
	arr, err := optDate(l.ArrivesAt)
	if err != nil {
		return LotRow{}, fmt.Errorf("arrives_at: %w", err)
	}
	return LotRow{
		SKU: sku, LotID: l.LotID, Kind: l.Kind, Good: l.Good, BestBefore: bb, RegSeq: l.RegSeq,
		ArrivesAt: arr, ValidFrom: from, ValidTo: to,
		Sellable: l.Sellable, Reserved: l.Reserved, Allocated: l.Allocated, Hidden: l.Hidden, Shipped: l.Shipped,
		Defective: l.Defective, Version: version, Location: stock.LocationOf(l),
	}, nil
}

const dateLayout = time.DateOnly

func date(s string) (time.Time, error) { return time.Parse(dateLayout, s) }

func optDate(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := date(s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// holdUntil is a snapshot's hold_until as PostgreSQL keeps it: to the microsecond, in UTC.
func holdUntil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// written is what one write call did.
type written struct {
	// fresh holds the indexes of the results newly inserted into the inbox.
	fresh map[int]bool
	// conflicts holds, by index, the results refused as conflicts (ErrConflict).
	conflicts     map[int]error
	moveConflicts []MoveConflict
	skips         Skips
	// outbound counts the outbox rows written.
	outbound int
}

func (w *written) add(o written) {
	if w.fresh == nil {
		w.fresh = map[int]bool{}
	}
	if w.conflicts == nil {
		w.conflicts = map[int]error{}
	}
	for i := range o.fresh {
		w.fresh[i] = true
	}
	for i, err := range o.conflicts {
		w.conflicts[i] = err
	}
	w.moveConflicts = append(w.moveConflicts, o.moveConflicts...)
	w.skips.add(o.skips)
	w.outbound += o.outbound
}

// write writes prepared results with one statement per table. Rows are sorted by key
// in every statement, so two workers writing overlapping batches lock rows in the same
// order and cannot deadlock each other.
func write(tx *gorm.DB, batch []prepared) (written, error) {
	w := written{fresh: make(map[int]bool, len(batch)), conflicts: map[int]error{}}

	// Inbox first: only the results it did not hold yet go on. Of two copies of a result
	// in the batch the first goes; the second is a duplicate, or a conflict if it differs.
	byKey := make(map[resultKey]int, len(batch))
	inbox := make([]InboxRow, 0, len(batch))
	for i, p := range batch {
		k := resultKey{p.inbox.Entity, p.inbox.EventID}
		if j, dup := byKey[k]; dup {
			if d := inboxDiff(batch[j].inbox, p.inbox); d != "" {
				w.conflicts[p.index] = conflictError(p.inbox, d)
			} else {
				w.skips.Duplicates++
			}
			continue
		}
		byKey[k] = i
		inbox = append(inbox, p.inbox)
	}
	slices.SortFunc(inbox, func(a, b InboxRow) int {
		return cmp.Or(cmp.Compare(a.Entity, b.Entity), cmp.Compare(a.EventID, b.EventID))
	})
	inserted, err := insertInbox(tx, inbox)
	if err != nil {
		return w, fmt.Errorf("inbox: %w", err)
	}
	if err := w.sortOut(tx, batch, byKey, inbox, inserted); err != nil {
		return w, fmt.Errorf("inbox: %w", err)
	}
	fresh := make([]prepared, 0, len(inserted))
	for _, r := range inbox {
		if k := (resultKey{r.Entity, r.EventID}); inserted[k] {
			p := batch[byKey[k]]
			w.fresh[p.index] = true
			fresh = append(fresh, p)
		}
	}

	// Of several snapshots of one order only the newest can win.
	orders := map[string]OrderRow{}
	var skus []SKURow
	var lots []LotRow
	var transfers []TransferRow
	var backorders []BackorderRow
	var moves []MoveRow
	nOrders := 0
	for _, p := range fresh {
		if o := p.order; o != nil {
			nOrders++
			if cur, ok := orders[o.LCID]; !ok || o.Seq > cur.Seq {
				orders[o.LCID] = *o
			}
		}
		skus = append(skus, p.skus...)
		lots = append(lots, p.lots...)
		transfers = append(transfers, p.transfers...)
		backorders = append(backorders, p.backorders...)
		moves = append(moves, p.moves...)
	}

	// A result's SKUs carry the version and the touched lots; only the results that set the
	// safety stock carry it (prepare gives their rows a settings version).
	nSKUs, nLots, err := writeSKUs(tx, skus, lots)
	if err != nil {
		return w, err
	}
	w.skips.OlderSKUs = len(skus) - nSKUs
	w.skips.OlderLots = len(lots) - nLots
	nTransfers, err := writeTransfers(tx, transfers)
	if err != nil {
		return w, fmt.Errorf("transfers: %w", err)
	}
	w.skips.OlderTransfers = len(transfers) - nTransfers
	nBackorders, err := writeBackorders(tx, backorders)
	if err != nil {
		return w, fmt.Errorf("backorders: %w", err)
	}
	w.skips.OlderBackorders = len(backorders) - nBackorders

	orderRows := sortedValues(orders, func(a, b OrderRow) int { return cmp.Compare(a.LCID, b.LCID) })
	n, err := upsertOrders(tx, orderRows)
	if err != nil {
		return w, fmt.Errorf("orders: %w", err)
	}
	w.skips.OlderOrders = nOrders - n

	if err := w.recordMoves(tx, moves); err != nil {
		return w, fmt.Errorf("moves: %w", err)
	}
	return w, nil
}

// sortOut tells, of the inbox rows not inserted, the redeliveries (duplicates) from the
// conflicts: results whose entity and event id the inbox holds with another body. Only a
// batch with such rows reads the inbox again, in one statement.
func (w *written) sortOut(tx *gorm.DB, batch []prepared, byKey map[resultKey]int, inbox []InboxRow, inserted map[resultKey]bool) error {
	var held []resultKey
	for _, r := range inbox {
		if k := (resultKey{r.Entity, r.EventID}); !inserted[k] {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return nil
	}
	stored, err := storedInbox(tx, held)
	if err != nil {
		return err
	}
	for _, k := range held {
		p := batch[byKey[k]]
		if s, ok := stored[k]; ok {
			if d := inboxDiff(s, p.inbox); d != "" {
				w.conflicts[p.index] = conflictError(p.inbox, d)
				continue
			}
		}
		w.skips.Duplicates++
	}
	return nil
}

// recordMoves records the moves of the fresh results. A move moves holds already is a
// duplicate when it is the same result's and moved the same, and a MoveConflict
// otherwise; so is a second move under one key in the batch.
func (w *written) recordMoves(tx *gorm.DB, moves []MoveRow) error {
	first := make(map[moveKey]MoveRow, len(moves))
	rows := moves[:0:0]
	for _, m := range moves {
		k := m.key()
		if f, dup := first[k]; dup {
			w.countMove(f, m)
			continue
		}
		first[k] = m
		rows = append(rows, m)
	}
	slices.SortFunc(rows, func(a, b MoveRow) int {
		return cmp.Or(cmp.Compare(a.SKU, b.SKU), cmp.Compare(a.OpID, b.OpID), cmp.Compare(a.Idx, b.Idx))
	})
	recorded, err := insertMoves(tx, rows)
	if err != nil {
		return err
	}
	var held []moveKey
	for _, m := range rows {
		if !recorded[m.key()] {
			held = append(held, m.key())
		}
	}
	if len(held) == 0 {
		return nil
	}
	stored, err := storedMoves(tx, held)
	if err != nil {
		return err
	}
	for _, k := range held {
		s, ok := stored[k]
		if !ok {
			s = first[k]
		}
		w.countMove(s, first[k])
	}
	return nil
}

func (w *written) countMove(stored, m MoveRow) {
	if sameMove(stored, m) {
		w.skips.DuplicateMoves++
		return
	}
	w.moveConflicts = append(w.moveConflicts, MoveConflict{Move: m, Stored: stored})
}

// writeSKUs upserts SKU rows and their locations' safety stocks, then lot rows, each where its version is newer than the
// stored one (a SKU row's settings where its settings version is), and returns how many
// of each it wrote. Of several rows for one key only one is sent, since one statement
// cannot update a row twice: a lot's newest, and per SKU the highest version with the
// settings of the highest settings version (which may be an older row's).
func writeSKUs(tx *gorm.DB, skus []SKURow, lots []LotRow) (nSKUs, nLots int, err error) {
	newestSKU := make(map[string]SKURow, len(skus))
	for _, s := range skus {
		cur, ok := newestSKU[s.SKU]
		if !ok {
			newestSKU[s.SKU] = s
			continue
		}
		cur.Version = max(cur.Version, s.Version)
		if s.SettingsVersion > cur.SettingsVersion {
			cur.SafetyStock, cur.SettingsVersion = s.SafetyStock, s.SettingsVersion
		}
		newestSKU[s.SKU] = cur
	}
	skuRows := sortedValues(newestSKU, func(a, b SKURow) int { return cmp.Compare(a.SKU, b.SKU) })
	nSKUs, err = upsertSKUs(tx, skuRows)
	if err != nil {
		return 0, 0, fmt.Errorf("skus: %w", err)
	}
	if err := upsertLocationSafety(tx, newestLocationSafety(skus)); err != nil {
		return 0, 0, fmt.Errorf("sku_location_safety: %w", err)
	}
	nLots, err = upsertLots(tx, newestRows(lots))
	if err != nil {
		return 0, 0, fmt.Errorf("lots: %w", err)
	}
	return nSKUs, nLots, nil
}

// writeTransfers upserts the newest row of each transfer where it is newer than the
// stored one, and returns how many it wrote.
func writeTransfers(tx *gorm.DB, rows []TransferRow) (int, error) {
	return upsertTransfers(tx, newestRows(rows))
}

// writeBackorders upserts the newest row of each waiting line where it is newer than the
// stored one, and returns how many it wrote.
func writeBackorders(tx *gorm.DB, rows []BackorderRow) (int, error) {
	return upsertBackorders(tx, newestRows(rows))
}

// rowKey is a row's primary key: its columns in order.
type rowKey interface{ ~[2]string | ~[3]string }

// compareKeys orders keys column by column.
func compareKeys[K rowKey](a, b K) int {
	for i := range len(a) {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// versionedRow is a row kept per key at the SKU version it was written at: a row of lots,
// transfers, sku_location_safety or backorders.
type versionedRow[K rowKey] interface {
	// rowKey is the row's primary key.
	rowKey() K
	rowVersion() int64
}

func (r LotRow) rowKey() [2]string            { return [2]string{r.SKU, r.LotID} }
func (r LotRow) rowVersion() int64            { return r.Version }
func (r TransferRow) rowKey() [2]string       { return [2]string{r.SKU, r.TransferID} }
func (r TransferRow) rowVersion() int64       { return r.Version }
func (r LocationSafetyRow) rowKey() [2]string { return [2]string{r.SKU, r.Location} }
func (r LocationSafetyRow) rowVersion() int64 { return r.Version }
func (r BackorderRow) rowKey() [3]string      { return [3]string{r.SKU, r.Holder, r.Line} }
func (r BackorderRow) rowVersion() int64      { return r.Version }

// newestRows keeps, of the rows of one key, the one of the highest version (one statement
// cannot update a row twice), sorted by key so that concurrent writers lock rows in one
// order.
func newestRows[K rowKey, R versionedRow[K]](rows []R) []R {
	newest := make(map[K]R, len(rows))
	for _, r := range rows {
		k := r.rowKey()
		if cur, ok := newest[k]; !ok || r.rowVersion() > cur.rowVersion() {
			newest[k] = r
		}
	}
	return sortedValues(newest, func(a, b R) int { return compareKeys(a.rowKey(), b.rowKey()) })
}

func sortedValues[K comparable, V any](m map[K]V, cmpFn func(a, b V) int) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, cmpFn)
	return out
}
