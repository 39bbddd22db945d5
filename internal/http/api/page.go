package api

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// encodeCursor makes a cursor opaque: clients pass it back, never build one.
func encodeCursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// maxCursorLen bounds a cursor as sent: every cursor is an entity (an lcid, a turn's
// entity) or a number, encoded.
var maxCursorLen = base64.RawURLEncoding.EncodedLen(MaxEntityLength)

// pageParams reads limit (1..max, default def) and cursor (decoded) of a list's query.
func pageParams(r *http.Request, def, max int) (int, string, error) {
	return pageQuery(r.URL.Query(), def, max)
}

// pageQuery is pageParams on a parsed query. A cursor that decodes to what checkID
// refuses is refused too: it reaches the lookups as an id.
func pageQuery(q url.Values, def, max int) (int, string, error) {
	limit := def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return 0, "", badRequest("limit %s is not an integer within 1..%d", quoteID(v), max)
		}
		limit = n
	}
	var cursor string
	if v := q.Get("cursor"); v != "" {
		if len(v) > maxCursorLen {
			return 0, "", badRequest("cursor %s is not one this API gave", quoteID(v))
		}
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || checkID("cursor", string(b), MaxEntityLength) != nil {
			return 0, "", badRequest("cursor %s is not one this API gave", quoteID(v))
		}
		cursor = string(b)
	}
	return limit, cursor, nil
}

// onlyParams refuses query parameters an endpoint does not take: a misspelt one would
// otherwise be ignored and the answer computed without it.
func onlyParams(q url.Values, names ...string) error {
	for k := range q {
		if !slices.Contains(names, k) {
			return badRequest("unknown query parameter %s (takes %s)", quoteID(k), strings.Join(names, ", "))
		}
	}
	return nil
}
