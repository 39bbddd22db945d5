package stock

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/junban/junban/internal/event"
)

// The queue of a SKU's waiting demand (docs/ledger.md, "Waiting demand"): the lines of
// orders that accepted to wait for stock, each with the units it still waits for,
// served by class, then in the order the ledger queued them. A new allocation sees the
// candidates' sellable less what the queue waits for, so it cannot take units an
// earlier line waits for; every operation but an allocation, a backorder and a dequeue
// ends by filling the queue from its head (Fill).

// MaxClass is the highest priority class a waiting line may have; 0 is the default and
// the last served.
const MaxClass = 9

// MaxResultFills bounds the lines one operation fills, so that its result fits in one
// queue message (internal/domain's result bound counts them); a transfer's operations,
// whose own result is larger, fill at most MaxTransferFills. Result.FillsMore says that
// the bound stopped the fill, and a FillRequest goes on.
const (
	MaxResultFills   = 8
	MaxTransferFills = 2
)

// fillLimit is the most lines the operation named name fills.
func fillLimit(name string) int {
	switch name {
	case "transfer", "transfer_receive", "transfer_cancel":
		return MaxTransferFills
	}
	return MaxResultFills
}

// BackorderRequest allocates what the candidates give of Qty now, as AllocateRequest
// does without a route, and queues the rest as Holder's line Line: the line waits for
// Qty less what was allocated. The units it may take now are the candidates' sellable
// less the queue's demand (less the SKU's safety stock for ship, and within the
// locations' caps); none is no error. ErrQueued when the line is queued already.
type BackorderRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string `json:"legacy_op_id,omitempty"`
	SKU        string `json:"sku"`
	// Holder (the order's lcid) and Line name the queue's entry; both required.
	Holder     string `json:"holder"`
	Line       string `json:"line"`
	Qty        int64  `json:"qty"`
	TargetDate string `json:"target_date"`
	Mode       Mode   `json:"mode"`
	// Class is the line's priority class, 0..MaxClass: a higher class is served first.
	Class int `json:"class,omitempty"`
	// QueuedAt is the caller's clock (Unix milliseconds), kept with a queued line for
	// how long it waits. Like the stock, it is the request's environment, not the
	// request: not in the fingerprint, so a re-run later replays the first answer.
	QueuedAt int64 `json:"queued_at,omitempty"`
}

// DequeueRequest lowers what Holder's line Line waits for by Qty (0: all of it): the line
// leaves the queue when it waits for nothing. A line that is not queued (filled
// meanwhile, or never queued) is no error: Result.Dequeued says what was taken off.
type DequeueRequest struct {
	OpID string `json:"op_id"`
	// LegacyOpID: see AllocateRequest.
	LegacyOpID string `json:"legacy_op_id,omitempty"`
	SKU        string `json:"sku"`
	Holder     string `json:"holder"`
	Line       string `json:"line"`
	// Qty is how much less the line waits for; 0: all it waits for.
	Qty int64 `json:"qty,omitempty"`
}

// FillRequest fills the SKU's queue from its head and changes nothing else: what an
// operation whose fill stopped at MaxResultFills leaves to do.
type FillRequest struct {
	OpID string `json:"op_id"`
	SKU  string `json:"sku"`
}

// QueueEntry is one waiting line of a SKU's queue.
type QueueEntry = event.QueueEntry

// Fill is units a fill allocated to a waiting line: Qty in Lots, moved into the bucket
// of the line's mode.
type Fill struct {
	Holder string   `json:"holder"`
	Line   string   `json:"line"`
	Qty    int64    `json:"qty"`
	Lots   []LotQty `json:"lots"`
}

func (r BackorderRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if err := checkQueueEntry(r.Holder, r.Line); err != nil {
		return err
	}
	if err := CheckQty("qty", r.Qty); err != nil {
		return err
	}
	if err := CheckDate("target_date", r.TargetDate); err != nil {
		return err
	}
	if r.Mode != ModeShip && r.Mode != ModeReserve {
		return Invalidf("mode %q is neither %q nor %q", r.Mode, ModeShip, ModeReserve)
	}
	if r.Class < 0 || r.Class > MaxClass {
		return Invalidf("class %d is not in 0..%d", r.Class, MaxClass)
	}
	return nil
}

func (r DequeueRequest) Validate() error {
	if err := checkHeadAs(r.OpID, r.LegacyOpID, r.SKU); err != nil {
		return err
	}
	if err := checkQueueEntry(r.Holder, r.Line); err != nil {
		return err
	}
	if r.Qty != 0 {
		return CheckQty("qty", r.Qty)
	}
	return nil
}

func (r FillRequest) Validate() error { return checkHead(r.OpID, r.SKU) }

func checkQueueEntry(holder, line string) error {
	if err := checkID("holder", holder); err != nil {
		return err
	}
	return checkID("line", line)
}

func (r BackorderRequest) Fingerprint() string {
	return newFingerprint("backorder", r.SKU).str(r.Holder).str(r.Line).num(r.Qty).str(r.TargetDate).str(string(r.Mode)).num(int64(r.Class)).sum()
}

func (r DequeueRequest) Fingerprint() string {
	return newFingerprint("dequeue", r.SKU).str(r.Holder).str(r.Line).num(r.Qty).sum()
}

func (r FillRequest) Fingerprint() string { return newFingerprint("fill", r.SKU).sum() }

// The quarantine cannot undo a queue's change with moves: it completes the event.
func (BackorderRequest) reversal() Reversal { return Irreversible }
func (DequeueRequest) reversal() Reversal   { return Irreversible }
func (FillRequest) reversal() Reversal      { return Irreversible }

// modelQueue is a SKU's queue in the Model: its entries in serving order and the last
// sequence number given.
type modelQueue struct {
	seq     int64
	entries []QueueEntry
}

func (q *modelQueue) clone() *modelQueue {
	if q == nil {
		return &modelQueue{}
	}
	return &modelQueue{seq: q.seq, entries: slices.Clone(q.entries)}
}

// demand is what the queue waits for.
func (q *modelQueue) demand() int64 {
	var n int64
	for _, e := range q.entries {
		n += e.Want
	}
	return n
}

func (q *modelQueue) find(holder, line string) int {
	return slices.IndexFunc(q.entries, func(e QueueEntry) bool { return e.Holder == holder && e.Line == line })
}

// serveOrder sorts entries as the queue serves them: higher class first, then by Seq.
func serveOrder(a, b QueueEntry) int {
	return cmp.Or(cmp.Compare(b.Class, a.Class), cmp.Compare(a.Seq, b.Seq))
}

func (r BackorderRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.applyAs(ctx, "walloc", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, r.Holder, r.Validate(), func(o *modelOp) (error, string) {
		if o.queue.find(r.Holder, r.Line) >= 0 {
			return ErrQueued, "holder=" + r.Holder + " line=" + r.Line
		}
		cands := candidatesOf(o.now(), r.TargetDate)
		avail := o.available(cands, r.Mode) - o.queue.demand()
		caps, total := o.capsFor(cands, r.Mode)
		if caps != nil {
			avail = min(avail, total-o.queue.demand())
		}
		take := max(0, min(r.Qty, avail))
		o.take(cands, take, ModeBucket(r.Mode), caps)
		if rest := r.Qty - take; rest > 0 {
			o.queue.seq++
			e := QueueEntry{Holder: r.Holder, Line: r.Line, Want: rest,
				Mode: r.Mode, TargetDate: r.TargetDate, Class: r.Class, Seq: o.queue.seq, QueuedAt: r.QueuedAt}
			o.queue.entries = append(o.queue.entries, e)
			slices.SortFunc(o.queue.entries, serveOrder)
			o.changed = append(o.changed, e)
			o.queued = rest
			o.position = int64(o.queue.find(r.Holder, r.Line)) + 1
		}
		return nil, ""
	})
}

func (r DequeueRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.applyAs(ctx, "dequeue", r.Fingerprint(), r.OpID, r.LegacyOpID, r.SKU, "", r.Validate(), func(o *modelOp) (error, string) {
		i := o.queue.find(r.Holder, r.Line)
		if i < 0 {
			return nil, ""
		}
		e := &o.queue.entries[i]
		off := e.Want
		if r.Qty != 0 {
			off = min(r.Qty, e.Want)
		}
		e.Want -= off
		o.dequeued, o.queued = off, e.Want
		o.changed = append(o.changed, *e)
		if e.Want == 0 {
			o.queue.entries = slices.Delete(o.queue.entries, i, i+1)
		}
		return nil, ""
	})
}

func (r FillRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "fill", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(*modelOp) (error, string) {
		return nil, "" // the fill every operation ends with is all it does
	})
}

// available is what an allocation of mode could take from cands before the queue's
// demand: their sellable, less the SKU's safety stock for ship (may be negative).
func (o *modelOp) available(cands []Lot, mode Mode) int64 {
	var sum int64
	for _, c := range cands {
		sum += c.Sellable
	}
	if mode == ModeShip {
		sum -= o.sku.SafetyStock
	}
	return sum
}

// fillsAfter tells whether an operation ends with the queue's fill: a SKU's operations
// (a hold, its release and a damage are "smove") and a FillRequest do, but a recall, which
// only takes stock (its result, with the lot's holders, has no room for fills); an order's
// do not, since its event may still move them back (its caller fills once it succeeded).
func fillsAfter(name string) bool {
	switch name {
	case "smove", "receive", "adjust", "reglot", "ss", "transfer", "transfer_receive", "transfer_cancel", "fill":
		return true
	}
	return false
}

// fill serves the queue from its head: each line in turn gets what an allocation of its
// mode on its date could take now (no queue demand: the queue is what it serves), up to
// what it waits for, in allocation order; a line that gets nothing is passed over (the
// next may take other lots). At most limit lines are filled (fillLimit).
func (o *modelOp) fill(limit int) {
	q := o.queue
	for i := 0; i < len(q.entries); {
		if len(o.fills) == limit {
			o.fillsMore = true
			return
		}
		e := &q.entries[i]
		cands := candidatesOf(o.now(), e.TargetDate)
		avail := o.available(cands, e.Mode)
		caps, total := o.capsFor(cands, e.Mode)
		if caps != nil {
			avail = min(avail, total)
		}
		take := max(0, min(e.Want, avail))
		if take == 0 {
			i++
			continue
		}
		saved, first := o.holder, len(o.moves)
		o.holder = e.Holder
		o.take(cands, take, ModeBucket(e.Mode), caps)
		o.holder = saved
		f := Fill{Holder: e.Holder, Line: e.Line, Qty: take}
		for _, mv := range o.moves[first:] {
			f.Lots = append(f.Lots, LotQty{LotID: mv.LotID, Qty: mv.Qty})
		}
		o.fills = append(o.fills, f)
		e.Want -= take
		o.changed = append(o.changed, *e)
		if e.Want == 0 {
			q.entries = slices.Delete(q.entries, i, i+1)
		} else {
			i++
		}
	}
}

// queuedDetail ends a refusal's detail with the queue's demand, when there is one.
func queuedDetail(queued int64) string {
	if queued == 0 {
		return ""
	}
	return fmt.Sprintf(" queued=%d", queued)
}

// Queue returns sku's waiting lines in serving order.
func (m *Model) Queue(sku string) []QueueEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.queues[sku]; q != nil && len(q.entries) > 0 {
		return slices.Clone(q.entries)
	}
	return nil
}
