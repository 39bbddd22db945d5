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

// pageParams reads limit (1..max, default def) and cursor (decoded) of a list.
func pageParams(r *http.Request, def, max int) (int, string, error) {
	q := r.URL.Query()
	limit := def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > max {
			return 0, "", badRequest("limit %q is not an integer within 1..%d", v, max)
		}
		limit = n
	}
	var cursor string
	if v := q.Get("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return 0, "", badRequest("cursor %q is not one this API gave", v)
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
			return badRequest("unknown query parameter %q (takes %s)", k, strings.Join(names, ", "))
		}
	}
	return nil
}
