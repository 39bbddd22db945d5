package stock

import (
	"cmp"
	"fmt"
	"sort"
)

// Candidate index records. Each is AllocKey + valid_from + valid_to + "s:" + lot_id + "\n"
// (the lot's sellable field), so records sort in allocation order; the scripts read them
// at fixed offsets (candidates.lua's SORT_LEN, PERIOD_AT, FIELD_AT).
const (
	// MaxRegSeq is the largest registration number (reg_seq): 15 digits, below 2^53 for Lua.
	MaxRegSeq = 999_999_999_999_999
	// KeyLen is the length of every AllocKey (candidates.lua's SORT_LEN).
	KeyLen      = 26
	NoBestFirst = "9999-99-99" // on-hand lot without best-before: after every date
	plannedBB   = "0000-00-00"
)

// AllocKey returns the lot's key in the allocation order: sorted byte by byte, keys give
// on-hand lots first by best-before (none = last) then registration order (FEFO), then
// planned lots by descending registration order (LIFO). It is kind (o|p) + 10 characters
// (the best-before, or a marker) + 15 digits (reg_seq, or its complement for a planned
// lot): KeyLen bytes.
//
// It is the only definition of the order. The Model sorts candidates by it; the load and
// the re-index write it into the index records and into each lot's stored key (k:<lot>);
// RegisterLot and Receive compute the key of the lot they (re)index and pass it to the
// script. ledger.lua copies keys it is given or finds stored, and never builds one.
func AllocKey(l Lot) string {
	if l.Kind == KindPlanned {
		return fmt.Sprintf("p%s%015d", plannedBB, MaxRegSeq-l.RegSeq)
	}
	bb := l.BestBefore
	if bb == "" {
		bb = NoBestFirst
	}
	return fmt.Sprintf("o%s%015d", bb, l.RegSeq)
}

// CheckSKUState validates a SKU as loaded from PostgreSQL: ids, kinds, dates, registration
// numbers unique and in range, no negative bucket.
func CheckSKUState(s SKU) error {
	if err := CheckSKU(s.SKU); err != nil {
		return err
	}
	if s.SafetyStock < 0 || s.SafetyStock > MaxQty {
		return Invalidf("sku %s: safety_stock %d out of range", s.SKU, s.SafetyStock)
	}
	for l, ss := range s.LocationSafety {
		if err := CheckLocation(l); err != nil {
			return err
		}
		if ss <= 0 || ss > MaxQty {
			return Invalidf("sku %s: safety_stock %d at %s out of range", s.SKU, ss, l)
		}
	}
	seen := map[string]bool{}
	regs := map[int64]string{}
	for _, l := range s.Lots {
		if err := CheckLotID(l.LotID); err != nil {
			return err
		}
		if seen[l.LotID] {
			return Invalidf("sku %s: lot %s twice", s.SKU, l.LotID)
		}
		seen[l.LotID] = true
		if other, dup := regs[l.RegSeq]; dup {
			return Invalidf("sku %s: lots %s and %s share reg_seq %d", s.SKU, other, l.LotID, l.RegSeq)
		}
		regs[l.RegSeq] = l.LotID
		if l.RegSeq < 0 || l.RegSeq > MaxRegSeq {
			return Invalidf("sku %s lot %s: reg_seq %d out of range", s.SKU, l.LotID, l.RegSeq)
		}
		if l.Location != "" {
			if err := CheckLocation(l.Location); err != nil {
				return Invalidf("sku %s lot %s: %v", s.SKU, l.LotID, err)
			}
		}
		if l.Kind != KindOnHand && l.Kind != KindPlanned {
			return Invalidf("sku %s lot %s: kind %q", s.SKU, l.LotID, l.Kind)
		}
		for _, d := range []struct{ f, v string }{{"best_before", l.BestBefore}, {"arrives_at", l.ArrivesAt}} {
			if d.v != "" {
				if err := CheckDate(d.f, d.v); err != nil {
					return err
				}
			}
		}
		if err := CheckDate("valid_from", l.ValidFrom); err != nil {
			return err
		}
		if err := CheckDate("valid_to", l.ValidTo); err != nil {
			return err
		}
		if l.ValidFrom > l.ValidTo {
			return Invalidf("sku %s lot %s: valid_from after valid_to", s.SKU, l.LotID)
		}
		for _, q := range []int64{l.Sellable, l.Reserved, l.Allocated, l.Hidden, l.Shipped} {
			if q < 0 || q > 1000*MaxQty {
				return Invalidf("sku %s lot %s: bucket quantity %d out of range", s.SKU, l.LotID, q)
			}
		}
	}
	if err := checkTransfers(s); err != nil {
		return err
	}
	return checkQueue(s)
}

// checkQueue validates a loaded SKU's waiting lines as a backorder makes them: a holder
// and a line once each, a want, mode, date and class a request may have, a sequence
// number no higher than the queue's last (QueueSeq, when given).
func checkQueue(s SKU) error {
	seen := map[[2]string]bool{}
	for _, e := range s.Queue {
		if err := checkQueueEntry(e.Holder, e.Line); err != nil {
			return Invalidf("sku %s queue: %v", s.SKU, err)
		}
		k := [2]string{e.Holder, e.Line}
		if seen[k] {
			return Invalidf("sku %s queue: holder %s line %s twice", s.SKU, e.Holder, e.Line)
		}
		seen[k] = true
		if err := CheckQty("want", e.Want); err != nil {
			return Invalidf("sku %s queue holder %s line %s: %v", s.SKU, e.Holder, e.Line, err)
		}
		if err := CheckDate("target_date", e.TargetDate); err != nil {
			return Invalidf("sku %s queue holder %s line %s: %v", s.SKU, e.Holder, e.Line, err)
		}
		switch {
		case e.Mode != ModeShip && e.Mode != ModeReserve:
			return Invalidf("sku %s queue holder %s line %s: mode %q", s.SKU, e.Holder, e.Line, e.Mode)
		case e.Class < 0 || e.Class > MaxClass:
			return Invalidf("sku %s queue holder %s line %s: class %d", s.SKU, e.Holder, e.Line, e.Class)
		case e.Seq <= 0 || s.QueueSeq != 0 && e.Seq > s.QueueSeq:
			return Invalidf("sku %s queue holder %s line %s: seq %d (last %d)", s.SKU, e.Holder, e.Line, e.Seq, s.QueueSeq)
		}
	}
	if s.QueueSeq < 0 {
		return Invalidf("sku %s: queue_seq %d", s.SKU, s.QueueSeq)
	}
	return nil
}

// checkTransfers validates a loaded SKU's transfers: ids once each, a known state, the
// lots' ids and quantities in range, as a request makes them (EncodeTransfer's text
// holds no tab or newline of them).
func checkTransfers(s SKU) error {
	seen := map[string]bool{}
	for _, t := range s.Transfers {
		if err := CheckTransferID(t.TransferID); err != nil {
			return Invalidf("sku %s: %v", s.SKU, err)
		}
		if seen[t.TransferID] {
			return Invalidf("sku %s: transfer %s twice", s.SKU, t.TransferID)
		}
		seen[t.TransferID] = true
		if t.State != TransferInTransit && t.State != TransferReceived && t.State != TransferCancelled {
			return Invalidf("sku %s transfer %s: state %q", s.SKU, t.TransferID, t.State)
		}
		for _, loc := range []string{t.From, t.To} {
			if err := CheckLocation(loc); err != nil {
				return Invalidf("sku %s transfer %s: %v", s.SKU, t.TransferID, err)
			}
		}
		if len(t.Lots) == 0 || len(t.Lots) > MaxTransferLots {
			return Invalidf("sku %s transfer %s: %d lots", s.SKU, t.TransferID, len(t.Lots))
		}
		for _, tl := range t.Lots {
			if err := cmp.Or(CheckLotID(tl.Source), CheckLotID(tl.Transit), CheckQty("qty", tl.Qty)); err != nil {
				return Invalidf("sku %s transfer %s: %v", s.SKU, t.TransferID, err)
			}
		}
	}
	return nil
}

func SortLots(lots []Lot) {
	sort.Slice(lots, func(i, j int) bool {
		if lots[i].RegSeq != lots[j].RegSeq {
			return lots[i].RegSeq < lots[j].RegSeq
		}
		return lots[i].LotID < lots[j].LotID
	})
}
