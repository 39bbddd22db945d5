package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
)

// QueueView is GET /v1/skus/{sku}/queue: the SKU's waiting lines (backorders) in
// serving order (docs/ledger.md, "Waiting demand").
type QueueView struct {
	SKU string `json:"sku"`
	// Source is "redis" (the live queue) or "postgres" (the SKU is not loaded: the queue
	// the first allocation will load).
	Source string `json:"source"`
	// Lines and Waiting are the whole queue's: its lines and the units they wait for,
	// whatever page the answer shows.
	Lines   int   `json:"lines"`
	Waiting int64 `json:"waiting"`
	// Entries are this page's lines, first served first.
	Entries []QueueLine `json:"entries"`
	// NextCursor continues the list; empty on its last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// QueueLine is one waiting line of a SKU's queue.
type QueueLine struct {
	// Position is the line's place in the queue, 1 for the next one served.
	Position int `json:"position"`
	// Holder is the order's lcid, Line its line.
	Holder     string     `json:"holder"`
	Line       string     `json:"line"`
	Want       int64      `json:"want"`
	Mode       event.Mode `json:"mode"`
	TargetDate string     `json:"target_date"`
	Class      int        `json:"class"`
	// Seq is the ledger's number of the line in the SKU: the order it was queued in.
	Seq int64 `json:"seq"`
	// QueuedAt is when the line was queued (the order-worker's clock); QueuedAtMs the same
	// instant in Unix milliseconds, as the ledger keeps it.
	QueuedAt   time.Time `json:"queued_at"`
	QueuedAtMs int64     `json:"queued_at_ms"`
}

// servingKey orders a queue's lines as the ledger serves them (its sorted set's score):
// by class, highest first, then by Seq. The queue's cursor is the last line's key.
func servingKey(e stock.QueueEntry) int64 {
	return int64(stock.MaxClass-e.Class)*1e13 + e.Seq
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request) error {
	limit, after, paged, err := seqPageQuery(r.URL.Query(), 100, 1000)
	if err != nil {
		return err
	}
	v, entries, err := s.d.ReadQueue(r.Context(), r.PathValue("sku"))
	if err != nil {
		return err
	}
	i := 0
	if paged {
		for i < len(entries) && servingKey(entries[i]) <= after {
			i++
		}
	}
	for ; i < len(entries) && len(v.Entries) < limit; i++ {
		v.Entries = append(v.Entries, QueueLineOf(i+1, entries[i]))
	}
	if i < len(entries) {
		v.NextCursor = encodeCursor(strconv.FormatInt(servingKey(entries[i-1]), 10))
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// QueueLineOf is the line of e at position pos (1: the next one served).
func QueueLineOf(pos int, e stock.QueueEntry) QueueLine {
	return QueueLine{Position: pos, Holder: e.Holder, Line: e.Line, Want: e.Want, Mode: e.Mode, TargetDate: e.TargetDate,
		Class: e.Class, Seq: e.Seq, QueuedAt: time.UnixMilli(e.QueuedAt).UTC(), QueuedAtMs: e.QueuedAt}
}

// ReadQueue returns a SKU's waiting lines in serving order, from Redis, or from
// PostgreSQL (Source "postgres") while the SKU is not loaded, with the view's totals
// (Entries left empty): what GET /v1/skus/{sku}/queue, the console and junbanctl queue
// show. An unknown SKU is stock.ErrUnknownSKU.
func (d Deps) ReadQueue(ctx context.Context, sku string) (QueueView, []stock.QueueEntry, error) {
	if err := checkID("sku", sku, event.MaxIDLength); err != nil {
		return QueueView{}, nil, err
	}
	_, loaded, err := d.Ledger.Version(ctx, sku)
	if err != nil {
		return QueueView{}, nil, err
	}
	v := QueueView{SKU: sku, Source: "redis", Entries: []QueueLine{}}
	var entries []stock.QueueEntry
	if loaded {
		entries, err = d.Ledger.Queue(ctx, sku)
	} else {
		v.Source = "postgres"
		var s stock.SKU
		s, err = inventorydb.PGLoader{DB: d.DB}.LoadSKU(ctx, sku)
		entries = s.Queue
	}
	if err != nil {
		return QueueView{}, nil, err
	}
	v.Lines = len(entries)
	for _, e := range entries {
		v.Waiting += e.Want
	}
	return v, entries, nil
}
