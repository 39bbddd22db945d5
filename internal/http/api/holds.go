package api

import (
	"net/http"
	"net/url"
	"time"
)

// HoldList is GET /v1/holds: placed orders whose reservation has an end, soonest first.
type HoldList struct {
	Holds []OrderRow `json:"holds"`
	// More tells that more holds match than the page shows.
	More bool `json:"more"`
}

// holdFilter is a GET /v1/holds query.
type holdFilter struct {
	// dueBefore keeps the holds ending before it (nil: every hold).
	dueBefore *time.Time
	limit     int
}

// holdListQuery reads and checks a GET /v1/holds query.
func holdListQuery(q url.Values) (holdFilter, error) {
	var f holdFilter
	if err := onlyParams(q, "due_before", "limit"); err != nil {
		return f, err
	}
	var err error
	if f.limit, _, err = pageQuery(q, 100, 1000); err != nil {
		return f, err
	}
	if v := q.Get("due_before"); v != "" {
		due, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, badRequest("due_before %s is not an RFC 3339 instant (2026-12-03T09:00:00Z)", quoteID(v))
		}
		f.dueBefore = &due
	}
	return f, nil
}

func (s *Server) listHolds(w http.ResponseWriter, r *http.Request) error {
	f, err := holdListQuery(r.URL.Query())
	if err != nil {
		return err
	}
	// The partial index orders_hold_due serves this: placed orders with a hold, by end.
	db := s.d.DB.WithContext(r.Context()).Table("orders").Select(orderColumns).
		Where("status = 'placed' AND hold_until IS NOT NULL")
	if f.dueBefore != nil {
		db = db.Where("hold_until < ?", *f.dueBefore)
	}
	var raw []orderScan
	if err := db.Order("hold_until, lcid").Limit(f.limit + 1).Scan(&raw).Error; err != nil {
		return err
	}
	out := HoldList{Holds: []OrderRow{}}
	for i, row := range raw {
		if i == f.limit {
			out.More = true
			break
		}
		out.Holds = append(out.Holds, row.view())
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
