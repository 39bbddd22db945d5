package outbound

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
)

// Bounds of a page.
const (
	// PageLimitDefault is how many messages a page holds when the query names no limit.
	PageLimitDefault = 100
	// PageLimitMax is the most messages a page holds.
	PageLimitMax = 1000
	// MaxEntityLength bounds an entity: an order's lcid, or "sku:" and a SKU.
	MaxEntityLength = event.MaxIDLength + len(event.SKUEntityPrefix)
)

var (
	// ErrInvalidCursor: a cursor is not one String gave.
	ErrInvalidCursor = errors.New("outbound: invalid cursor")
	// ErrInvalidQuery: a query's limit, kind or entity is out of bounds.
	ErrInvalidQuery = errors.New("outbound: invalid query")
)

// cursorVersion begins every cursor, so a later layout can tell an old cursor apart.
const cursorVersion = "v1."

// maxCursorLength bounds a cursor as sent: "v1." and two 20-digit numbers, encoded.
var maxCursorLength = base64.RawURLEncoding.EncodedLen(len(cursorVersion) + 20 + 1 + 20)

// Cursor is a place in the outbox's commit order: the (txid, id) of the last row a page
// served. The zero Cursor is the start.
type Cursor struct {
	txid uint64
	id   int64
}

// String returns the cursor in its opaque, URL-safe form (base64url of "v1.TXID.ID"),
// which ParseCursor takes back.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + strconv.FormatUint(c.txid, 10) + "." + strconv.FormatInt(c.id, 10)))
}

// IsZero tells whether c is the start.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// ParseCursor reads a cursor String gave; anything else is an error wrapping
// ErrInvalidCursor. The empty string is the start.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := func(why string) (Cursor, error) {
		return Cursor{}, fmt.Errorf("%w: %s", ErrInvalidCursor, why)
	}
	if len(s) > maxCursorLength {
		return bad(fmt.Sprintf("longer than %d bytes", maxCursorLength))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	rest, ok := strings.CutPrefix(string(b), cursorVersion)
	if !ok {
		return bad("not of this version")
	}
	txid, id, ok := strings.Cut(rest, ".")
	if !ok {
		return bad("no position")
	}
	var c Cursor
	if c.txid, err = strconv.ParseUint(txid, 10, 64); err != nil {
		return bad("no transaction id")
	}
	if c.id, err = strconv.ParseInt(id, 10, 64); err != nil || c.id < 0 {
		return bad("no row id")
	}
	// One cursor, one spelling: "01" or a padded encoding is none String gave.
	if c.String() != s {
		return bad("not in its canonical form")
	}
	return c, nil
}

// Query selects a page of the outbox.
type Query struct {
	// After is the cursor of the previous page (the zero Cursor: from the oldest row kept).
	After Cursor
	// Limit is the most messages the page holds: 1..PageLimitMax; 0: PageLimitDefault.
	Limit int
	// Kinds keeps only messages of these kinds; none: every kind.
	Kinds []Kind
	// Entity keeps only the messages of this entity (an lcid, or "sku:" and a SKU);
	// empty: every entity.
	Entity string
}

// Check tells what is wrong with q, as an error wrapping ErrInvalidQuery.
func (q Query) Check() error {
	if q.Limit < 0 || q.Limit > PageLimitMax {
		return fmt.Errorf("%w: limit %d is not within 1..%d", ErrInvalidQuery, q.Limit, PageLimitMax)
	}
	for _, k := range q.Kinds {
		if !slices.Contains(Kinds, k) {
			return fmt.Errorf("%w: unknown kind %.64q", ErrInvalidQuery, k)
		}
	}
	if q.Entity != "" {
		if len(q.Entity) > MaxEntityLength {
			return fmt.Errorf("%w: entity longer than %d bytes", ErrInvalidQuery, MaxEntityLength)
		}
		if err := event.CheckID(q.Entity); err != nil {
			return fmt.Errorf("%w: entity: %w", ErrInvalidQuery, err)
		}
	}
	return nil
}

// pageSQL serves a row only once every transaction that could still write one before it
// in (txid, id) order has ended: txid below the snapshot's xmin. A row a slower
// transaction commits later always comes after the cursor of any page served before, so
// paging never skips one. Any transaction of the cluster holding an xid holds the pages
// back until it ends. The text of the txid goes out under another name: ORDER BY txid
// would sort an output column named txid, the text, where 10000 comes before 9999.
const pageSQL = `SELECT txid::text AS txid_text, id, body::text AS body FROM outbox
WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
  AND (txid, id) > (CAST(CAST(? AS text) AS xid8), ?)`

// lastVisibleSQL is the position of the last row pageSQL would serve, filters aside: a
// filtered page that is not full has served every matching row up to it. In one
// statement with the page (UNION ALL), both parts see one snapshot.
const lastVisibleSQL = `SELECT txid::text AS txid_text, id, NULL AS body FROM outbox
WHERE txid < pg_snapshot_xmin(pg_current_snapshot())
  AND (txid, id) > (CAST(CAST(? AS text) AS xid8), ?)
ORDER BY txid DESC, id DESC LIMIT 1`

// Page returns up to q.Limit message bodies (as stored, byte for byte) after q.After, in
// commit order, and the cursor of the next page: the last message's, or, when the page is
// not full, the last row the query could serve (filters aside, so that a consumer of a
// rare kind does not read the same rows again at every poll); q.After when there is none.
func Page(ctx context.Context, db *gorm.DB, q Query) ([]json.RawMessage, Cursor, error) {
	if err := q.Check(); err != nil {
		return nil, q.After, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = PageLimitDefault
	}
	after := []any{strconv.FormatUint(q.After.txid, 10), q.After.id}
	sql, args := pageSQL, slices.Clone(after)
	filtered := len(q.Kinds) > 0 || q.Entity != ""
	if len(q.Kinds) > 0 {
		kinds := make([]string, len(q.Kinds))
		for i, k := range q.Kinds {
			kinds[i] = string(k)
		}
		sql += "\n  AND kind IN ?"
		args = append(args, kinds)
	}
	if q.Entity != "" {
		sql += "\n  AND entity = ?"
		args = append(args, q.Entity)
	}
	sql += "\nORDER BY txid, id LIMIT ?"
	args = append(args, limit)
	if filtered {
		sql = "(" + sql + ")\nUNION ALL\n(" + lastVisibleSQL + ")"
		args = append(args, after...)
	}
	var rows []struct {
		TxidText string
		ID       int64
		Body     *string
	}
	if err := db.WithContext(ctx).Raw(sql, args...).Scan(&rows).Error; err != nil {
		return nil, q.After, fmt.Errorf("outbound: page after %s: %w", q.After, err)
	}
	msgs := make([]json.RawMessage, 0, len(rows))
	next, last := q.After, q.After
	for _, r := range rows {
		txid, err := strconv.ParseUint(r.TxidText, 10, 64)
		if err != nil {
			return nil, q.After, fmt.Errorf("outbound: page: txid %q of row %d: %w", r.TxidText, r.ID, err)
		}
		if r.Body == nil {
			last = Cursor{txid: txid, id: r.ID}
			continue
		}
		msgs = append(msgs, json.RawMessage(*r.Body))
		next = Cursor{txid: txid, id: r.ID}
	}
	if len(msgs) < limit {
		next = last.max(next)
	}
	return msgs, next, nil
}

// max is the later of c and d.
func (c Cursor) max(d Cursor) Cursor {
	if d.txid > c.txid || (d.txid == c.txid && d.id > c.id) {
		return d
	}
	return c
}
