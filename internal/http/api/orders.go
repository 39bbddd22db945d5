package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/turninfo"
)

// OrderView is GET /v1/orders/{lcid}: the state in Redis, the timeline in PostgreSQL
// and the turn.
type OrderView struct {
	LCID string `json:"lcid"`
	// State is the order in Redis (nil: Redis holds none, e.g. not placed yet, or only
	// in PostgreSQL); StateSeq is the seq of the newest result it reflects.
	State    *event.OrderSnapshot `json:"state"`
	StateSeq int64                `json:"state_seq"`
	// Timeline are the order's events with a result in PostgreSQL, by seq.
	Timeline []TimelineEvent `json:"timeline"`
	// TimelineNextCursor continues the timeline; empty on its last page.
	TimelineNextCursor string          `json:"timeline_next_cursor,omitempty"`
	Turn               turninfo.Report `json:"turn"`
}

// TimelineEvent is one event of an order as persisted.
type TimelineEvent struct {
	EventID     string    `json:"event_id"`
	Seq         int64     `json:"seq"`
	Type        string    `json:"type"`
	Outcome     string    `json:"outcome"`
	Reason      string    `json:"reason,omitempty"`
	ProcessedAt time.Time `json:"processed_at"`
	CommittedAt time.Time `json:"committed_at"`
	// TraceID is the trace the event's step ran in, when it was traced; TraceURL its
	// address in the trace viewer (JUNBAN_TRACE_URL), when one is set.
	TraceID  string `json:"trace_id,omitempty"`
	TraceURL string `json:"trace_url,omitempty"`
	Moves    []Move `json:"moves"`
}

// Move is one ledger move an event made.
type Move struct {
	OpID       string `json:"op_id"`
	Index      int    `json:"index"`
	SKU        string `json:"sku"`
	LotID      string `json:"lot_id"`
	From       string `json:"from"`
	To         string `json:"to"`
	Qty        int64  `json:"qty"`
	SKUVersion int64  `json:"sku_version"`
}

const (
	timelineQuery = `SELECT event_id, seq, type, outcome, reason, processed_at, committed_at, trace_id
  FROM inbox WHERE entity = ? AND seq > ? ORDER BY seq, event_id LIMIT ?`
	movesQuery = `SELECT event_id, op_id, idx, sku, lot_id, from_bucket, to_bucket, qty, sku_version
  FROM moves WHERE entity = ? AND event_id IN ? ORDER BY op_id, idx`
)

// seqPageQuery reads the query of a list whose cursor is a number (an order's timeline:
// a seq; a SKU's lots: a registration number): limit (1..max, default def), the number
// after which the page starts, and whether a cursor gave it (none: from the start).
func seqPageQuery(q url.Values, def, max int) (int, int64, bool, error) {
	if err := onlyParams(q, "limit", "cursor"); err != nil {
		return 0, 0, false, err
	}
	limit, cursor, err := pageQuery(q, def, max)
	if err != nil || cursor == "" {
		return limit, 0, false, err
	}
	after, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || after < 0 {
		return 0, 0, false, badRequest("cursor %s is not one this endpoint gave", quoteID(q.Get("cursor")))
	}
	return limit, after, true, nil
}

func (s *Server) getOrder(w http.ResponseWriter, r *http.Request) error {
	limit, after, _, err := seqPageQuery(r.URL.Query(), 200, 1000)
	if err != nil {
		return err
	}
	v, err := s.d.ReadOrder(r.Context(), r.PathValue("lcid"), limit, after)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// ReadOrder returns an order's state in Redis, up to limit events of its timeline in
// PostgreSQL after seq afterSeq, and its turn: what GET /v1/orders/{lcid} and junbanctl
// order show. An order that neither holds has a not-found error.
func (d Deps) ReadOrder(ctx context.Context, lcid string, limit int, afterSeq int64) (OrderView, error) {
	if err := checkID("lcid", lcid, event.MaxIDLength); err != nil {
		return OrderView{}, err
	}
	if err := lockhandoff.CheckEntity(lcid); err != nil {
		return OrderView{}, err
	}
	v := OrderView{LCID: lcid, Timeline: []TimelineEvent{}}
	var err error
	if v.Turn, err = turninfo.Inspect(ctx, d.Redis, d.Prefix, lcid); err != nil {
		return v, err
	}
	st, err := order.LoadState(ctx, d.Redis, d.Prefix, lcid)
	if err != nil {
		return v, err
	}
	v.State, v.StateSeq = st.Order, st.Seq
	var dbRows []struct {
		EventID, Type, Outcome, Reason, TraceID string
		Seq                                     int64
		ProcessedAt, CommittedAt                time.Time
	}
	if err := d.DB.WithContext(ctx).Raw(timelineQuery, lcid, afterSeq, limit+1).Scan(&dbRows).Error; err != nil {
		return v, err
	}
	rows := make([]TimelineEvent, len(dbRows))
	for i, r := range dbRows {
		rows[i] = TimelineEvent{EventID: r.EventID, Seq: r.Seq, Type: r.Type, Outcome: r.Outcome, Reason: r.Reason,
			ProcessedAt: r.ProcessedAt.UTC(), CommittedAt: r.CommittedAt.UTC(), Moves: []Move{},
			TraceID: r.TraceID, TraceURL: TraceLink(d.TraceURL, r.TraceID)}
	}
	if len(rows) > limit {
		rows = rows[:limit]
		v.TimelineNextCursor = encodeCursor(strconv.FormatInt(rows[len(rows)-1].Seq, 10))
	}
	if len(rows) > 0 {
		ids := make([]string, len(rows))
		at := map[string]int{}
		for i := range rows {
			ids[i], at[rows[i].EventID] = rows[i].EventID, i
		}
		var ms []struct {
			EventID, OpID, SKU, LotID, FromBucket, ToBucket string
			Idx                                             int
			Qty, SKUVersion                                 int64
		}
		if err := d.DB.WithContext(ctx).Raw(movesQuery, lcid, ids).Scan(&ms).Error; err != nil {
			return v, err
		}
		for _, m := range ms {
			i := at[m.EventID]
			rows[i].Moves = append(rows[i].Moves, Move{OpID: m.OpID, Index: m.Idx, SKU: m.SKU, LotID: m.LotID,
				From: m.FromBucket, To: m.ToBucket, Qty: m.Qty, SKUVersion: m.SKUVersion})
		}
		v.Timeline = rows
	}
	t := v.Turn
	if v.State == nil && st.Seq == 0 && len(v.Timeline) == 0 && afterSeq == 0 && t.Holder == "" && t.Proc == nil && t.WaitDepth == 0 && len(t.Parked) == 0 {
		return v, notFound("", "no order %s in Redis or PostgreSQL", lcid)
	}
	return v, nil
}

// OrderRow is an order as persisted (GET /v1/orders).
type OrderRow struct {
	LCID       string               `json:"lcid"`
	Status     string               `json:"status"`
	Allocation string               `json:"allocation,omitempty"`
	Paid       bool                 `json:"paid"`
	Mode       string               `json:"mode,omitempty"`
	TargetDate string               `json:"target_date,omitempty"`
	Lines      []event.SnapshotLine `json:"lines"`
	// HoldUntil is when a placed reserve-mode order's reservation expires (absent: never).
	HoldUntil   *time.Time `json:"hold_until,omitempty"`
	Seq         int64      `json:"seq"`
	LastEventID string     `json:"last_event_id"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// OrderList is GET /v1/orders.
type OrderList struct {
	Orders     []OrderRow `json:"orders"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

var orderStatuses = map[string]bool{
	event.StatusPlaced: true, event.StatusCancelled: true, event.StatusShipped: true, event.StatusRejected: true,
	event.StatusExpired: true,
}

// orderFilter is a GET /v1/orders query: its filters (empty: any) and page.
type orderFilter struct {
	status, sku, cursor string
	limit               int
}

// orderListQuery reads and checks a GET /v1/orders query; the cursor is an lcid.
func orderListQuery(q url.Values) (orderFilter, error) {
	var f orderFilter
	if err := onlyParams(q, "status", "sku", "limit", "cursor"); err != nil {
		return f, err
	}
	var err error
	if f.limit, f.cursor, err = pageQuery(q, 100, 1000); err != nil {
		return f, err
	}
	if f.cursor != "" && len(f.cursor) > event.MaxIDLength {
		return f, badRequest("cursor is not one this endpoint gave")
	}
	if f.status = q.Get("status"); f.status != "" && !orderStatuses[f.status] {
		return f, badRequest("status %s is not placed, cancelled, shipped, rejected or expired", quoteID(f.status))
	}
	if f.sku = q.Get("sku"); f.sku != "" {
		if err := checkID("sku", f.sku, event.MaxIDLength); err != nil {
			return f, err
		}
		if err := stock.CheckSKU(f.sku); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (s *Server) listOrders(w http.ResponseWriter, r *http.Request) error {
	f, err := orderListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	limit := f.limit
	db := s.d.DB.WithContext(r.Context()).Table("orders").Select(orderColumns)
	if f.status != "" {
		db = db.Where("status = ?", f.status)
	}
	if f.sku != "" {
		js, _ := json.Marshal([]map[string]string{{"sku": f.sku}})
		db = db.Where("lines @> ?::jsonb", string(js))
	}
	if f.cursor != "" {
		db = db.Where("lcid > ?", f.cursor)
	}
	var raw []orderScan
	if err := db.Order("lcid").Limit(limit + 1).Scan(&raw).Error; err != nil {
		return err
	}
	out := OrderList{Orders: []OrderRow{}}
	for i, row := range raw {
		if i == limit {
			out.NextCursor = encodeCursor(raw[i-1].LCID)
			break
		}
		out.Orders = append(out.Orders, row.view())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// orderColumns are the columns of an OrderRow, read into an orderScan.
const orderColumns = `lcid, status, coalesce(allocation, '') AS allocation, paid, coalesce(mode, '') AS mode,
  coalesce(to_char(target_date, 'YYYY-MM-DD'), '') AS target_date, lines::text AS lines, hold_until, seq, last_event_id, updated_at`

// orderScan is a row of orderColumns.
type orderScan struct {
	LCID                                                     string `gorm:"column:lcid"`
	Status, Allocation, Mode, TargetDate, Lines, LastEventID string
	Paid                                                     bool
	HoldUntil                                                *time.Time
	Seq                                                      int64
	UpdatedAt                                                time.Time
}

func (row orderScan) view() OrderRow {
	o := OrderRow{LCID: row.LCID, Status: row.Status, Allocation: row.Allocation, Paid: row.Paid, Mode: row.Mode,
		TargetDate: row.TargetDate, Seq: row.Seq, LastEventID: row.LastEventID, UpdatedAt: row.UpdatedAt.UTC()}
	if row.HoldUntil != nil {
		h := row.HoldUntil.UTC()
		o.HoldUntil = &h
	}
	if err := json.Unmarshal([]byte(row.Lines), &o.Lines); err != nil || o.Lines == nil {
		o.Lines = []event.SnapshotLine{}
	}
	return o
}
