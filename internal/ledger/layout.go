package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/junban/junban/internal/ledger/stock"
)

// Redis layout of one SKU (docs/ledger.md explains the choice):
//
//	<prefix>:inv:{<sku>}               hash
//	    v        version
//	    ss       safety stock (network-wide)
//	    sl       the locations' own safety stocks "loc\tn\tloc\tn ...", by location id
//	             (stock.EncodeLocationSafety), only locations with one; absent or empty:
//	             none. Read with v, ss, on, o:0 and kl in the scripts' first HMGET
//	    on       number of candidate index chunks
//	    o:<i>    candidate index chunk i: the good lots with sellable > 0, in allocation
//	             order, one record per lot; a load writes indexChunk records per chunk,
//	             ledger.lua keeps it current as lots empty, refill and register by editing
//	             one chunk (1..2*indexChunk records; a lone o:0 may be empty)
//	    n        the next registration number (reg_seq) RegisterLot gives
//	    kl       the key layout the index and the stored keys were written in (keyLayout)
//	    m:<lot>  meta "kind\tgood\tbest_before\treg_seq\tarrives_at\tvalid_from\tvalid_to"
//	    k:<lot>  the lot's stored key: AllocKey of the lot, then the meta it was computed
//	             for (a key whose meta is not the lot's is no key: an older version
//	             changed the meta)
//	    s:<lot>  sellable (read for every candidate an allocation looks at)
//	    b:<lot>  the other buckets "reserved allocated hidden shipped defective" (read
//	             and written together, only for the lots an operation touches; a hash
//	             written before the defective bucket existed has four)
//	    p:<lot>  the location the lot is stored at; absent: the default location (every
//	             lot from before locations, and every lot registered without one).
//	             Written once, when the lot is registered or loaded
//	    t:<id>   a transfer (stock.EncodeTransfer): written by its operations, and by a
//	             load from the SKU's Transfers
//	<prefix>:inv:{<sku>}:op:<op_id>    string, the op's result, expires after Config.OpRetention
//	<prefix>:inv:{<sku>}:h:<lot>       hash lcid -> the reserved+allocated units the order
//	                                   holds in the lot (operations that name a holder)
//
// Every key of a SKU carries the hash tag {<sku>}, so one script may touch them all,
// also on a Redis Cluster.

// Key returns the key of a SKU's hash; every other key of the SKU starts with it.
func Key(prefix, sku string) string { return prefix + ":inv:{" + sku + "}" }

func opKey(prefix, sku, opID string) string { return Key(prefix, sku) + ":op:" + opID }

// Hash fields of the SKU settings.
const (
	fieldVersion = "v"
	fieldSafety  = "ss"
	fieldLocSafe = "sl"
	fieldChunks  = "on"
	fieldNextReg = "n"
	fieldLayout  = "kl"
	// fieldQueued and fieldQueueSeq are the queue's demand and its last sequence number
	// (ledger.lua's "Waiting demand").
	fieldQueued   = "qw"
	fieldQueueSeq = "qn"
	// indexChunk is the number of index records per hash field a load writes; ledger.lua's
	// CHUNK (an edit splits a chunk past twice as many).
	indexChunk = 32
)

// bucketCodes are the bucket names in ledger.lua's arguments.
var bucketCodes = map[string]string{
	stock.Sellable: "s", stock.Reserved: "r", stock.Allocated: "a", stock.Hidden: "h", stock.Shipped: "x", stock.Defective: "d",
}

func indexRecord(l stock.Lot) string {
	return stock.AllocKey(l) + l.ValidFrom + l.ValidTo + "s:" + l.LotID + "\n"
}

// storedKey is the value of a lot's k:<lot> field: its key, then the meta it is the key
// of. The script trusts a stored key only while the lot's meta is that meta.
func storedKey(l stock.Lot, meta string) string { return stock.AllocKey(l) + meta }

// keyLayout names the layout of the index records and the stored keys: a digest of what
// indexRecord writes for layoutProbe, so that any change to AllocKey or indexRecord
// changes it. Every SKU hash carries the layout it was written in (field kl); the scripts
// carry this one (scriptHeader) and refuse a SKU in another with ERR_REINDEX, upon which
// the Go side re-indexes the SKU (Reindex) and runs the operation again.
var keyLayout = layoutOf(indexRecord)

// layoutProbe are lots of every kind of key: on hand with and without best-before,
// planned, registration numbers at both ends.
var layoutProbe = []stock.Lot{
	{LotID: "a", Kind: stock.KindOnHand, BestBefore: "2027-01-31", RegSeq: 0, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate},
	{LotID: "b", Kind: stock.KindOnHand, BestBefore: "", RegSeq: 7, ValidFrom: "2026-12-01", ValidTo: "2026-12-31"},
	{LotID: "c", Kind: stock.KindOnHand, BestBefore: "2026-12-15", RegSeq: stock.MaxRegSeq, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate},
	{LotID: "d", Kind: stock.KindPlanned, RegSeq: 0, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate},
	{LotID: "e", Kind: stock.KindPlanned, RegSeq: 12345, ArrivesAt: "2026-12-03", ValidFrom: "2026-12-05", ValidTo: stock.MaxDate},
	{LotID: "f", Kind: stock.KindPlanned, RegSeq: stock.MaxRegSeq, ValidFrom: stock.MinDate, ValidTo: stock.MaxDate},
}

func layoutOf(record func(stock.Lot) string) string {
	h := sha256.New()
	for _, l := range layoutProbe {
		h.Write([]byte(record(l))) // a hash.Hash never returns an error
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// scriptHeader opens every script that reads the index: the layout it reads.
func scriptHeader() string { return "local KEY_LAYOUT = '" + keyLayout + "'\n" }

// buildIndex returns the candidate index of lots, split into chunks: the good ones with
// sellable stock, in allocation order. There is always at least one chunk.
func buildIndex(lots []stock.Lot) []string {
	var records []string
	for _, l := range lots {
		if l.Good && l.Sellable > 0 {
			records = append(records, indexRecord(l))
		}
	}
	// Records start with their key, and keys are unique in a SKU (reg_seq is).
	sort.Strings(records)
	chunks := []string{}
	var b strings.Builder
	for i, r := range records {
		b.WriteString(r)
		if (i+1)%indexChunk == 0 {
			chunks = append(chunks, b.String())
			b.Reset()
		}
	}
	if b.Len() > 0 || len(chunks) == 0 {
		chunks = append(chunks, b.String())
	}
	return chunks
}

func encodeMeta(l stock.Lot) string {
	good := "0"
	if l.Good {
		good = "1"
	}
	return strings.Join([]string{l.Kind, good, l.BestBefore, strconv.FormatInt(l.RegSeq, 10),
		l.ArrivesAt, l.ValidFrom, l.ValidTo}, "\t")
}

func decodeMeta(l *stock.Lot, s string) error {
	f := strings.Split(s, "\t")
	if len(f) != 7 {
		return fmt.Errorf("ledger: lot %s: bad meta %q", l.LotID, s)
	}
	reg, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return fmt.Errorf("ledger: lot %s: bad reg_seq %q", l.LotID, f[3])
	}
	l.Kind, l.Good, l.BestBefore, l.RegSeq, l.ArrivesAt, l.ValidFrom, l.ValidTo =
		f[0], f[1] == "1", f[2], reg, f[4], f[5], f[6]
	return nil
}

// loadFields returns the hash of a SKU as field/value pairs.
func loadFields(s stock.SKU) []any {
	chunks := buildIndex(s.Lots)
	next := int64(0)
	for _, l := range s.Lots {
		next = max(next, l.RegSeq+1)
	}
	out := make([]any, 0, 10+2*len(chunks)+8*len(s.Lots))
	out = append(out, fieldVersion, strconv.FormatInt(s.Version, 10),
		fieldSafety, strconv.FormatInt(s.SafetyStock, 10), fieldChunks, strconv.Itoa(len(chunks)),
		fieldNextReg, strconv.FormatInt(next, 10), fieldLayout, keyLayout)
	if sl := stock.EncodeLocationSafety(s.LocationSafety); sl != "" {
		out = append(out, fieldLocSafe, sl)
	}
	for i, c := range chunks {
		out = append(out, "o:"+strconv.Itoa(i), c)
	}
	for _, l := range s.Lots {
		meta := encodeMeta(l)
		out = append(out, "m:"+l.LotID, meta, "k:"+l.LotID, storedKey(l, meta),
			"s:"+l.LotID, strconv.FormatInt(l.Sellable, 10),
			"b:"+l.LotID, fmt.Sprintf("%d %d %d %d %d", l.Reserved, l.Allocated, l.Hidden, l.Shipped, l.Defective))
		if loc := storedLocation(l.Location); loc != "" {
			out = append(out, "p:"+l.LotID, loc)
		}
	}
	for _, t := range s.Transfers {
		out = append(out, "t:"+t.TransferID, stock.EncodeTransfer(t))
	}
	if len(s.Queue) > 0 || s.QueueSeq > 0 {
		var want int64
		seq := s.QueueSeq
		for _, e := range s.Queue {
			want, seq = want+e.Want, max(seq, e.Seq)
		}
		out = append(out, fieldQueued, strconv.FormatInt(want, 10), fieldQueueSeq, strconv.FormatInt(seq, 10))
	}
	return out
}

// loadArgs are load.lua's arguments for s: the number of the hash's field/value pairs'
// values, those (loadFields), then each waiting line's member, score and fields, as
// ledger.lua writes them to <key>:q and <key>:qe.
func loadArgs(s stock.SKU) []any {
	fields := loadFields(s)
	out := make([]any, 0, 1+len(fields)+3*len(s.Queue))
	out = append(out, strconv.Itoa(len(fields)))
	out = append(out, fields...)
	for _, e := range s.Queue {
		out = append(out, e.Holder+"\t"+e.Line, strconv.FormatInt(int64(stock.MaxClass-e.Class)*1e13+e.Seq, 10),
			fmt.Sprintf("%d\t%s\t%s\t%d\t%d\t%d", e.Want, e.Mode, e.TargetDate, e.Class, e.Seq, e.QueuedAt))
	}
	return out
}

// storedLocation is the p:<lot> value of a lot at location: none for the default.
func storedLocation(location string) string {
	if location == stock.DefaultLocation {
		return ""
	}
	return location
}

// decodeHash turns a SKU hash (HGETALL) into a SKU, lots by registration order.
func decodeHash(sku string, h map[string]string) (stock.SKU, error) {
	s := stock.SKU{SKU: sku, Lots: []stock.Lot{}}
	var err error
	if s.Version, err = strconv.ParseInt(h[fieldVersion], 10, 64); err != nil {
		return s, fmt.Errorf("ledger: sku %s: bad version %q", sku, h[fieldVersion])
	}
	if s.SafetyStock, err = strconv.ParseInt(h[fieldSafety], 10, 64); err != nil {
		return s, fmt.Errorf("ledger: sku %s: bad safety stock %q", sku, h[fieldSafety])
	}
	if s.LocationSafety, err = stock.DecodeLocationSafety(h[fieldLocSafe]); err != nil {
		return s, fmt.Errorf("ledger: sku %s: %w", sku, err)
	}
	for f, v := range h {
		if tid, ok := strings.CutPrefix(f, "t:"); ok {
			t, err := stock.DecodeTransfer(tid, v)
			if err != nil {
				return s, fmt.Errorf("ledger: sku %s: %w", sku, err)
			}
			s.Transfers = append(s.Transfers, t)
			continue
		}
		id, ok := strings.CutPrefix(f, "m:")
		if !ok {
			continue
		}
		l := stock.Lot{LotID: id}
		if err := decodeMeta(&l, v); err != nil {
			return s, err
		}
		if l.Sellable, err = strconv.ParseInt(h["s:"+id], 10, 64); err != nil {
			return s, fmt.Errorf("ledger: sku %s lot %s: bad sellable %q", sku, id, h["s:"+id])
		}
		if err := decodeBuckets(&l, h["b:"+id]); err != nil {
			return s, fmt.Errorf("ledger: sku %s lot %s: %w", sku, id, err)
		}
		l.Location = h["p:"+id]
		s.Lots = append(s.Lots, l)
	}
	stock.SortLots(s.Lots)
	stock.SortTransfers(s.Transfers)
	return s, nil
}

// decodeResult parses a success result of ledger.lua:
//
//	<version>
//	m \t lot \t from \t to \t qty          one per move, in order
//	l \t lot \t <meta, 7 fields> \t sellable \t "reserved allocated hidden shipped defective"
//	  [\t location]                       one per touched lot; the location only for a
//	                                       lot not at the default one
//	c \t reason                            operations with a reason
//	s \t safety_stock                      RegisterSKU, SetSafetyStock
//	S \t location                          SetSafetyStock at a location
//	n \t count                             Recall: the lot's holders
//	k \t lcid \t qty                       Recall: one per holder listed
//	t \t id \t state \t from \t to [\t source \t transit \t qty]...
//	                                       a transfer's operations: the transfer
//	q \t queued \t position \t dequeued   Backorder (when it queued), Dequeue
//	f \t holder \t line \t qty [\t lot \t qty]...
//	                                       one per waiting line the fill served
//	F                                      the fill stopped at MaxResultFills
//	Q \t holder \t line \t want \t mode \t date \t class \t seq \t at
//	                                       one per queue entry the operation changed
func decodeResult(opID, sku, text string) (stock.Result, error) {
	r := stock.Result{OpID: opID, SKU: sku, Moves: []stock.Move{}, Lots: []stock.Lot{}}
	bad := func(line string) (stock.Result, error) {
		return r, fmt.Errorf("ledger: bad script result line %q", line)
	}
	line, rest, _ := strings.Cut(text, "\n")
	var err error
	if r.Version, err = strconv.ParseInt(line, 10, 64); err != nil {
		return bad(line)
	}
	for rest != "" {
		line, rest, _ = strings.Cut(rest, "\n")
		kind, f, _ := strings.Cut(line, "\t")
		switch kind {
		case "m":
			var lot, from, to, qty string
			lot, f, _ = strings.Cut(f, "\t")
			from, f, _ = strings.Cut(f, "\t")
			to, qty, _ = strings.Cut(f, "\t")
			q, err := strconv.ParseInt(qty, 10, 64)
			if err != nil {
				return bad(line)
			}
			r.Moves = append(r.Moves, stock.Move{OpID: opID, Index: len(r.Moves), SKU: sku, LotID: lot, From: from, To: to, Qty: q, Version: r.Version})
		case "l":
			l, err := decodeLotLine(f)
			if err != nil {
				return bad(line)
			}
			r.Lots = append(r.Lots, l)
		case "c":
			r.Reason = f
		case "s":
			if r.SafetyStock, err = strconv.ParseInt(f, 10, 64); err != nil {
				return bad(line)
			}
		case "S":
			r.SafetyLocation = f
		case "n":
			if r.HolderCount, err = strconv.Atoi(f); err != nil {
				return bad(line)
			}
		case "k":
			lcid, qty, _ := strings.Cut(f, "\t")
			q, err := strconv.ParseInt(qty, 10, 64)
			if err != nil || len(r.Lots) == 0 {
				return bad(line)
			}
			// A recall touches its lot first (a fill after it may touch others); the lot
			// lines come before the holders.
			r.Holders = append(r.Holders, stock.Holder{LCID: lcid, LotID: r.Lots[0].LotID, Qty: q})
		case "t":
			t, err := decodeTransferLine(f)
			if err != nil {
				return bad(line)
			}
			r.Transfer = &t
		case "q":
			if r.Queued, r.Position, r.Dequeued, err = decodeQueueLine(f); err != nil {
				return bad(line)
			}
		case "f":
			fill, err := decodeFillLine(f)
			if err != nil {
				return bad(line)
			}
			r.Fills = append(r.Fills, fill)
		case "F":
			r.FillsMore = true
		case "Q":
			fs := strings.SplitN(f, "\t", 3)
			if len(fs) != 3 {
				return bad(line)
			}
			e, err := decodeQueueEntry(fs[0]+"\t"+fs[1], fs[2])
			if err != nil {
				return bad(line)
			}
			r.Queue = append(r.Queue, e)
		default:
			return bad(line)
		}
	}
	return r, nil
}

// decodeTransferLine parses "id \t state \t from \t to", then "\t source \t transit \t
// qty" per lot: the fields of a result's transfer line, ledger.lua's EncodeTransfer
// text with its id first and its newlines as tabs.
func decodeTransferLine(f string) (stock.Transfer, error) {
	fs := strings.Split(f, "\t")
	if len(fs) < 4 || (len(fs)-4)%3 != 0 {
		return stock.Transfer{}, errors.New("bad transfer line")
	}
	t := stock.Transfer{TransferID: fs[0], State: fs[1], From: fs[2], To: fs[3]}
	for i := 4; i < len(fs); i += 3 {
		q, err := strconv.ParseInt(fs[i+2], 10, 64)
		if err != nil {
			return t, err
		}
		t.Lots = append(t.Lots, stock.TransferLot{Source: fs[i], Transit: fs[i+1], Qty: q})
	}
	return t, nil
}

// decodeLotLine parses "lot \t <meta, 7 fields> \t sellable \t r a h x d [\t location]".
func decodeLotLine(f string) (stock.Lot, error) {
	var l stock.Lot
	var fields [10]string
	for i := range 9 {
		var ok bool
		fields[i], f, ok = strings.Cut(f, "\t")
		if !ok {
			return l, errors.New("short lot line")
		}
	}
	fields[9] = f
	l.LotID = fields[0]
	fields[9], l.Location, _ = strings.Cut(fields[9], "\t")
	l.Kind, l.Good, l.BestBefore, l.ArrivesAt, l.ValidFrom, l.ValidTo =
		fields[1], fields[2] == "1", fields[3], fields[5], fields[6], fields[7]
	var err error
	if l.RegSeq, err = strconv.ParseInt(fields[4], 10, 64); err != nil {
		return l, err
	}
	if l.Sellable, err = strconv.ParseInt(fields[8], 10, 64); err != nil {
		return l, err
	}
	return l, decodeBuckets(&l, fields[9])
}

// decodeBuckets parses the b:<lot> field "reserved allocated hidden shipped defective"
// (four numbers in a hash written before the defective bucket: defective 0).
func decodeBuckets(l *stock.Lot, s string) error {
	all := s
	l.Defective = 0
	for i, q := range []*int64{&l.Reserved, &l.Allocated, &l.Hidden, &l.Shipped, &l.Defective} {
		if i == 4 && s == "" {
			return nil
		}
		v, rest, _ := strings.Cut(s, " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("ledger: bad buckets %q", all)
		}
		*q, s = n, rest
	}
	if s != "" {
		return fmt.Errorf("ledger: bad buckets %q", all)
	}
	return nil
}

// decodeQueueLine parses "queued \t position \t dequeued".
func decodeQueueLine(f string) (queued, position, dequeued int64, err error) {
	fs := strings.Split(f, "\t")
	if len(fs) != 3 {
		return 0, 0, 0, errors.New("bad queue line")
	}
	var n [3]int64
	for i, v := range fs {
		if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, 0, err
		}
	}
	return n[0], n[1], n[2], nil
}

// decodeFillLine parses "holder \t line \t qty", then "\t lot \t qty" per lot.
func decodeFillLine(f string) (stock.Fill, error) {
	fs := strings.Split(f, "\t")
	if len(fs) < 5 || (len(fs)-3)%2 != 0 {
		return stock.Fill{}, errors.New("bad fill line")
	}
	q, err := strconv.ParseInt(fs[2], 10, 64)
	if err != nil {
		return stock.Fill{}, err
	}
	fill := stock.Fill{Holder: fs[0], Line: fs[1], Qty: q}
	for i := 3; i < len(fs); i += 2 {
		n, err := strconv.ParseInt(fs[i+1], 10, 64)
		if err != nil {
			return stock.Fill{}, err
		}
		fill.Lots = append(fill.Lots, stock.LotQty{LotID: fs[i], Qty: n})
	}
	return fill, nil
}

// decodeQueueEntry parses a queue entry: its member "holder \t line" and its fields
// "want \t mode \t date \t class \t seq \t at".
func decodeQueueEntry(member, fields string) (stock.QueueEntry, error) {
	holder, line, ok := strings.Cut(member, "\t")
	fs := strings.Split(fields, "\t")
	if !ok || len(fs) != 6 {
		return stock.QueueEntry{}, fmt.Errorf("bad queue entry %q: %q", member, fields)
	}
	e := stock.QueueEntry{Holder: holder, Line: line, Mode: stock.Mode(fs[1]), TargetDate: fs[2]}
	var err error
	var class int64
	if e.Want, err = strconv.ParseInt(fs[0], 10, 64); err == nil {
		if class, err = strconv.ParseInt(fs[3], 10, 64); err == nil {
			if e.Seq, err = strconv.ParseInt(fs[4], 10, 64); err == nil {
				e.QueuedAt, err = strconv.ParseInt(fs[5], 10, 64)
			}
		}
	}
	e.Class = int(class)
	if err != nil {
		return stock.QueueEntry{}, fmt.Errorf("bad queue entry %q: %q", member, fields)
	}
	return e, nil
}
