package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/junban/junban/internal/platform/tracing"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/order/turninfo"
)

// StuckTurn is one entry of GET /v1/turns/stuck.
type StuckTurn struct {
	// Why lists what makes it stuck: "failed_runs" (its event in hand has failed runs),
	// "old_event" (the event in hand waits longer than the bound), "orphaned_backlog"
	// (events wait, none in hand, no holder, for longer than the bound).
	Why  []string        `json:"why"`
	Turn turninfo.Report `json:"turn"`
}

// StuckList is GET /v1/turns/stuck.
type StuckList struct {
	// OlderThan is the bound applied.
	OlderThan  string      `json:"older_than"`
	Turns      []StuckTurn `json:"turns"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// stuckScanBound bounds the entities one page inspects, so a page costs a bounded
// number of Redis round trips even when few of them are stuck.
const stuckScanBound = 2000

// stuckQuery reads a GET /v1/turns/stuck query: the age bound (def when not given), the
// page's limit and its cursor (an entity).
func stuckQuery(q url.Values, def time.Duration) (time.Duration, int, string, error) {
	if err := onlyParams(q, "older_than", "limit", "cursor"); err != nil {
		return 0, 0, "", err
	}
	limit, cursor, err := pageQuery(q, 50, 500)
	if err != nil {
		return 0, 0, "", err
	}
	age := def
	if v := q.Get("older_than"); v != "" {
		if age, err = time.ParseDuration(v); err != nil || age <= 0 {
			return 0, 0, "", badRequest("older_than %s is not a positive duration (30s, 5m, 1h)", quoteID(v))
		}
	}
	return age, limit, cursor, nil
}

func (s *Server) stuckTurns(w http.ResponseWriter, r *http.Request) error {
	age, limit, cursor, err := stuckQuery(r.URL.Query(), s.o.StuckAge)
	if err != nil {
		return err
	}
	ctx := r.Context()
	entries, err := lockhandoff.BacklogIndex(ctx, s.d.Redis, s.d.Prefix, s.d.IndexShards)
	if err != nil {
		return err
	}
	// Entities in name order, so a cursor (the last one looked at) resumes the walk.
	slices.SortFunc(entries, func(a, b lockhandoff.BacklogEntry) int { return strings.Compare(a.Entity, b.Entity) })
	entries = slices.CompactFunc(entries, func(a, b lockhandoff.BacklogEntry) bool { return a.Entity == b.Entity })
	cut := s.d.Now().Add(-age)
	out := StuckList{OlderThan: age.String(), Turns: []StuckTurn{}}
	looked := 0
	for i, e := range entries {
		if e.Entity <= cursor {
			continue
		}
		if len(out.Turns) == limit || looked == stuckScanBound {
			out.NextCursor = encodeCursor(entries[i-1].Entity)
			break
		}
		looked++
		t, err := turninfo.Inspect(ctx, s.d.Redis, s.d.Prefix, e.Entity)
		if errors.Is(err, lockhandoff.ErrInvalidEntity) {
			continue
		}
		if err != nil {
			return err
		}
		var why []string
		if p := t.Proc; p != nil {
			if p.Attempts > 0 {
				why = append(why, "failed_runs")
			}
			if p.EnqueuedAt.Before(cut) {
				why = append(why, "old_event")
			}
		} else if t.WaitDepth > 0 && t.Holder == "" && e.Refreshed.Before(cut) {
			why = append(why, "orphaned_backlog")
		}
		if len(why) > 0 {
			out.Turns = append(out.Turns, StuckTurn{Why: why, Turn: t})
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// SkipAnswer is POST /v1/turns/{lcid}/skip.
type SkipAnswer struct {
	LCID string `json:"lcid"`
	// EventID and Type name the event that a worker dead-letters with Reason.
	EventID string `json:"event_id,omitempty"`
	Type    string `json:"type,omitempty"`
	Reason  string `json:"reason"`
	// Nudged is false when the nudge to a worker failed: the sweeper acts on the skip
	// instead, later.
	Nudged bool `json:"nudged"`
}

func (s *Server) skipTurn(w http.ResponseWriter, r *http.Request) error {
	lcid := r.PathValue("lcid")
	if err := onlyParams(r.URL.Query()); err != nil {
		return err
	}
	if err := lockhandoff.CheckEntity(lcid); err != nil {
		return err
	}
	nudge := s.d.Nudge
	if nudge == nil {
		return &apiError{status: http.StatusServiceUnavailable, typ: ProblemUnavailable, detail: "no orders queue to nudge a worker with"}
	}
	env, err := turninfo.Skip(r.Context(), s.d.Redis, s.d.Prefix, lcid, nudge)
	if errors.Is(err, lockhandoff.ErrNothingToSkip) {
		return &apiError{status: http.StatusConflict, typ: ProblemConflict, detail: "the turn of " + lcid + " has no event in hand"}
	}
	if env == nil && err != nil {
		return err
	}
	ans := SkipAnswer{LCID: lcid, Reason: order.ReasonSkipped, Nudged: err == nil}
	var h struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	_ = json.Unmarshal(env, &h) // for the log line and the answer only
	ans.EventID, ans.Type = h.EventID, h.Type
	s.log.Info("api: turn skip asked", append(tracing.LogFields(r.Context()), zap.String("lcid", lcid), zap.String("event_id", h.EventID), zap.Bool("nudged", ans.Nudged), zap.NamedError("nudge_error", err))...)
	writeJSON(w, http.StatusAccepted, ans)
	return nil
}
