package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/junban/junban/internal/postgres/outbound"
)

// EventPage is GET /v1/events: outbound messages in commit order, each the body the relay
// publishes, byte for byte.
type EventPage struct {
	Events []json.RawMessage `json:"events"`
	// Next continues after the last event; on an empty page it is the cursor sent.
	Next string `json:"next"`
}

// eventsQuery reads and checks a GET /v1/events query: after (a cursor of this endpoint),
// limit, kind (kinds, comma separated; repeated: any of them) and entity.
func eventsQuery(q url.Values) (outbound.Query, error) {
	var out outbound.Query
	if err := onlyParams(q, "after", "limit", "kind", "entity"); err != nil {
		return out, err
	}
	if v := q.Get("after"); v != "" {
		c, err := outbound.ParseCursor(v)
		if err != nil {
			return out, badRequest("after %s is not a cursor this endpoint gave", quoteID(v))
		}
		out.After = c
	}
	out.Limit = outbound.PageLimitDefault
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > outbound.PageLimitMax {
			return out, badRequest("limit %s is not an integer within 1..%d", quoteID(v), outbound.PageLimitMax)
		}
		out.Limit = n
	}
	for _, v := range q["kind"] {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(outbound.Kinds, outbound.Kind(k)) {
				return out, badRequest("kind %s is none of %s", quoteID(k), kindList())
			}
			if !slices.Contains(out.Kinds, outbound.Kind(k)) {
				out.Kinds = append(out.Kinds, outbound.Kind(k))
			}
		}
	}
	if q.Has("entity") {
		v := q.Get("entity")
		if err := checkID("entity", v, MaxEntityLength); err != nil {
			return out, err
		}
		out.Entity = v
	}
	return out, nil
}

// kindList names the outbound kinds for a problem's detail.
func kindList() string {
	names := make([]string, len(outbound.Kinds))
	for i, k := range outbound.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := eventsQuery(r.URL.Query())
	if err != nil {
		return err
	}
	msgs, next, err := outbound.Page(r.Context(), s.d.DB, q)
	if errors.Is(err, outbound.ErrInvalidQuery) {
		return badRequest("%s", strings.TrimPrefix(err.Error(), "outbound: "))
	}
	if err != nil {
		return err
	}
	writeEncoded(w, http.StatusOK, encodeEventPage(msgs, next))
	return nil
}

// encodeEventPage writes the page by hand: an encoder would compact or re-escape the
// bodies, which are served as the relay publishes them.
func encodeEventPage(msgs []json.RawMessage, next outbound.Cursor) []byte {
	n := 32
	for _, m := range msgs {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"events":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m...)
	}
	// A cursor is base64url: nothing in it needs escaping.
	b = append(b, `],"next":"`...)
	b = append(b, next.String()...)
	return append(b, "\"}\n"...)
}
