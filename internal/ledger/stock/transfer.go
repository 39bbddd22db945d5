package stock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/junban/junban/internal/event"
)

// Transfer states.
const (
	TransferInTransit = "in_transit"
	TransferReceived  = "received"
	TransferCancelled = "cancelled"
)

// Transfer is a transfer of one SKU as the ledger keeps it (Redis: the SKU hash's field
// t:<transfer id>, EncodeTransfer's text, which leaves the id to the field's name).
type Transfer = event.Transfer

// TransferLot is what a transfer took from one source lot.
type TransferLot = event.TransferLot

// TransferSent is the quantity a transfer sent.
func TransferSent(t Transfer) int64 {
	var n int64
	for _, l := range t.Lots {
		n += l.Qty
	}
	return n
}

// EncodeTransfer writes t as ledger.lua keeps it: "state \t from \t to", then a line
// "source \t transit \t qty" per lot.
func EncodeTransfer(t Transfer) string {
	var b strings.Builder
	b.WriteString(t.State + "\t" + t.From + "\t" + t.To)
	for _, l := range t.Lots {
		fmt.Fprintf(&b, "\n%s\t%s\t%d", l.Source, l.Transit, l.Qty)
	}
	return b.String()
}

// DecodeTransfer reads EncodeTransfer's text of the transfer id.
func DecodeTransfer(id, s string) (Transfer, error) {
	lines := strings.Split(s, "\n")
	head := strings.Split(lines[0], "\t")
	if len(head) != 3 {
		return Transfer{}, fmt.Errorf("ledger: transfer record %q", lines[0])
	}
	t := Transfer{TransferID: id, State: head[0], From: head[1], To: head[2]}
	for _, ln := range lines[1:] {
		var l TransferLot
		f := strings.Split(ln, "\t")
		if len(f) != 3 {
			return Transfer{}, fmt.Errorf("ledger: transfer record lot %q", ln)
		}
		l.Source, l.Transit = f[0], f[1]
		if _, err := fmt.Sscan(f[2], &l.Qty); err != nil {
			return Transfer{}, fmt.Errorf("ledger: transfer record lot %q: %w", ln, err)
		}
		t.Lots = append(t.Lots, l)
	}
	return t, nil
}

// Transfer returns a SKU's transfer, ok false when it has none by that id.
func (m *Model) Transfer(sku, id string) (Transfer, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.transfers[sku][id]
	if !ok {
		return Transfer{}, false
	}
	return *cloneTransfer(t), true
}

// cloneTransfer is a copy of t that shares nothing with it (nil for nil).
func cloneTransfer(t *Transfer) *Transfer {
	if t == nil {
		return nil
	}
	c := *t
	c.Lots = slices.Clone(t.Lots)
	return &c
}

// SortTransfers sorts a SKU's transfers by id, as a snapshot and a load list them.
func SortTransfers(ts []Transfer) {
	slices.SortFunc(ts, func(a, b Transfer) int { return strings.Compare(a.TransferID, b.TransferID) })
}

func (TransferRequest) reversal() Reversal        { return Irreversible }
func (TransferReceiveRequest) reversal() Reversal { return Irreversible }
func (TransferCancelRequest) reversal() Reversal  { return Irreversible }

// storedLocation is a location as a lot stores it: empty for the default one.
func storedLocation(id string) string {
	if id == DefaultLocation {
		return ""
	}
	return id
}

// TransferRequest: takes Qty units from the good on-hand lots at From with sellable stock,
// in allocation order (FEFO: AllocKey), whatever their period; each source lot's units
// move sellable -> transit, then transit -> sellable of a new planned lot at To
// (TransitLotID), a copy of the source lot's best-before and period, arriving ArrivesAt,
// registered after every other lot. ErrTransferExists for a transfer id the SKU has,
// ErrShortage when From's lots do not cover Qty, ErrTransferLots when they need more than
// MaxTransferLots lots.

func (r TransferRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "transfer", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		if _, ok := m.transfers[r.SKU][r.TransferID]; ok { // m.mu is held while fn runs
			return ErrTransferExists, "transfer=" + r.TransferID
		}
		var src []Lot
		next := int64(0)
		for _, l := range o.sku.Lots {
			next = max(next, l.RegSeq+1)
			if l.Good && l.Kind == KindOnHand && l.Sellable > 0 && LocationOf(l) == r.From {
				src = append(src, l)
			}
		}
		slices.SortFunc(src, func(a, b Lot) int { return strings.Compare(AllocKey(a), AllocKey(b)) })
		var sum int64
		for _, l := range src {
			sum += l.Sellable
		}
		if sum < r.Qty {
			return ErrShortage, fmt.Sprintf("requested=%d available=%d location=%s", r.Qty, sum, r.From)
		}
		var take []TransferLot
		for rem, i := r.Qty, 0; rem > 0; i++ {
			q := min(rem, src[i].Sellable)
			take = append(take, TransferLot{Source: src[i].LotID, Transit: TransitLotID(r.TransferID, src[i].LotID), Qty: q})
			rem -= q
		}
		if len(take) > MaxTransferLots {
			return ErrTransferLots, fmt.Sprintf("transfer=%s lots=%d max=%d", r.TransferID, len(take), MaxTransferLots)
		}
		for _, tl := range take {
			if o.lot(tl.Transit) != nil {
				return ErrLotExists, "lot=" + tl.Transit
			}
		}
		if next+int64(len(take))-1 > MaxRegSeq {
			return ErrLotState, fmt.Sprintf("lot=%s no registration number left after %d", take[0].Transit, next-1)
		}
		for i, tl := range take {
			s := o.lot(tl.Source)
			o.move(s, Sellable, Transit, tl.Qty)
			o.sku.Lots = append(o.sku.Lots, Lot{LotID: tl.Transit, Kind: KindPlanned, Good: true, BestBefore: s.BestBefore,
				RegSeq: next + int64(i), ArrivesAt: r.ArrivesAt, ValidFrom: s.ValidFrom, ValidTo: s.ValidTo, Location: storedLocation(r.To)})
			o.move(o.lot(tl.Transit), Transit, Sellable, tl.Qty)
		}
		if m.transfers[r.SKU] == nil {
			m.transfers[r.SKU] = map[string]*Transfer{}
		}
		t := &Transfer{TransferID: r.TransferID, State: TransferInTransit, From: r.From, To: r.To, Lots: take}
		m.transfers[r.SKU][r.TransferID] = t
		o.transfer = cloneTransfer(t)
		return nil, ""
	})
}

// openTransfer returns the SKU's transfer in transit by id, or why there is none.
func (m *Model) openTransfer(sku, id string) (*Transfer, error, string) {
	t, ok := m.transfers[sku][id]
	if !ok {
		return nil, ErrUnknownTransfer, "transfer=" + id
	}
	if t.State != TransferInTransit {
		return nil, ErrTransferState, "transfer=" + id + " state=" + t.State
	}
	return t, nil, ""
}

// TransferReceiveRequest: the transfer's transit lots become on hand at its destination,
// in the order the request took them; Qty is the count: the units short of what was sent
// move sellable -> defective, from the last transit lot first. ErrUnknownTransfer,
// ErrTransferState (not in transit, or Qty above what was sent), ErrInsufficient when the
// transit lots' sellable is short of the shortfall (the destination promised the rest).

func (r TransferReceiveRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "transfer_receive", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		t, err, detail := m.openTransfer(r.SKU, r.TransferID)
		if err != nil {
			return err, detail
		}
		if sent := TransferSent(*t); r.Qty > sent {
			return ErrTransferState, fmt.Sprintf("transfer=%s sent=%d counted=%d", r.TransferID, sent, r.Qty)
		}
		// o.lot's pointers last until the next lot is touched: look each up again.
		var sell int64
		for _, tl := range t.Lots {
			l := o.lot(tl.Transit)
			if l == nil {
				return ErrUnknownLot, "lot=" + tl.Transit
			}
			sell += l.Sellable
		}
		short := TransferSent(*t) - r.Qty
		if sell < short {
			return ErrInsufficient, fmt.Sprintf("transfer=%s sellable=%d short_by=%d", r.TransferID, sell, short)
		}
		for i := len(t.Lots) - 1; i >= 0 && short > 0; i-- {
			l := o.lot(t.Lots[i].Transit)
			if q := min(short, l.Sellable); q > 0 {
				o.move(l, Sellable, Defective, q)
				short -= q
			}
		}
		for _, tl := range t.Lots {
			o.lot(tl.Transit).Kind = KindOnHand
		}
		t.State = TransferReceived
		o.transfer = cloneTransfer(t)
		return nil, ""
	})
}

// TransferCancelRequest: each transit lot's units go back to its source lot (sellable ->
// transit -> sellable), in the order the request took them. ErrUnknownTransfer,
// ErrTransferState (not in transit), ErrTransferPromised when a transit lot holds units
// outside sellable (the destination reserved, allocated or shipped them).

func (r TransferCancelRequest) model(ctx context.Context, m *Model) (Result, error) {
	return m.apply(ctx, "transfer_cancel", r.Fingerprint(), r.OpID, r.SKU, r.Validate(), func(o *modelOp) (error, string) {
		t, err, detail := m.openTransfer(r.SKU, r.TransferID)
		if err != nil {
			return err, detail
		}
		for _, tl := range t.Lots {
			if o.lot(tl.Transit) == nil {
				return ErrUnknownLot, "lot=" + tl.Transit
			}
		}
		for _, tl := range t.Lots {
			if l := o.lot(tl.Transit); l.Sellable < tl.Qty {
				return ErrTransferPromised, fmt.Sprintf("transfer=%s lot=%s promised=%d", r.TransferID, tl.Transit, tl.Qty-l.Sellable)
			}
		}
		for _, tl := range t.Lots {
			if o.lot(tl.Source) == nil {
				return ErrUnknownLot, "lot=" + tl.Source
			}
		}
		for _, tl := range t.Lots {
			o.move(o.lot(tl.Transit), Sellable, Transit, tl.Qty)
			o.move(o.lot(tl.Source), Transit, Sellable, tl.Qty)
		}
		t.State = TransferCancelled
		o.transfer = cloneTransfer(t)
		return nil, ""
	})
}
