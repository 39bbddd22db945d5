// Package turninfo is what an operator sees and does of an entity's turn: Inspect reads
// the turn, the order's parked events and its results list (junbanctl turn show, junban-api's
// stuck turns and the console), Skip asks for the quarantine of the event in hand
// (junbanctl turn skip, junban-api's skip).
package turninfo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
)

// Report is what an operator sees of an entity's turn (junbanctl turn show).
type Report struct {
	Entity string `json:"entity"`
	// Holder is the token of the worker that holds the turn ("" when free); LeaseLeftMs
	// is its lease's TTL.
	Holder      string `json:"holder,omitempty"`
	LeaseLeftMs int64  `json:"lease_left_ms,omitempty"`
	// Seq is the fencing sequence of the newest envelope that entered proc.
	Seq int64 `json:"seq"`
	// Proc is the event in hand, nil when none.
	Proc *ProcReport `json:"proc,omitempty"`
	// WaitDepth is the number of events waiting behind it.
	WaitDepth int64 `json:"wait_depth"`
	// Results list is the number of committed results not yet accepted by SQS.
	Outbox int64 `json:"outbox"`
	// Parked are the events waiting for their precondition.
	Parked []ParkedReport `json:"parked"`
	// ResultSeq counts the entity's results.
	ResultSeq int64 `json:"result_seq"`
}

// ProcReport is the event in proc with its failed runs.
type ProcReport struct {
	EventID    string    `json:"event_id,omitempty"`
	Type       string    `json:"type,omitempty"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
	FirstFail  time.Time `json:"first_failure,omitzero"`
	LastFail   time.Time `json:"last_failure,omitzero"`
	// SkipAsked is true once an operator asked for its quarantine.
	SkipAsked bool `json:"skip_asked"`
	// Body is the envelope as it is in Redis.
	Body json.RawMessage `json:"body"`
}

// ParkedReport is a parked event.
type ParkedReport struct {
	EventID  string    `json:"event_id"`
	Type     string    `json:"type"`
	ParkedAt time.Time `json:"parked_at"`
}

// Inspect reads an entity's turn, its state's parked events and its results list. It writes
// nothing.
func Inspect(ctx context.Context, rc redis.UniversalClient, prefix, entity string) (Report, error) {
	info, err := lockhandoff.Inspect(ctx, rc, prefix, entity)
	if err != nil {
		return Report{}, err
	}
	st, err := order.LoadState(ctx, rc, prefix, entity)
	if err != nil {
		return Report{}, err
	}
	outbox, err := rc.LLen(ctx, lockhandoff.Key(prefix, entity, "outbox")).Result()
	if err != nil {
		return Report{}, fmt.Errorf("order: outbox of %s: %w", entity, err)
	}
	r := Report{
		Entity: entity, Holder: info.Holder, LeaseLeftMs: info.LeaseLeft.Milliseconds(), Seq: info.Seq,
		WaitDepth: info.WaitDepth, Outbox: outbox, ResultSeq: st.Seq, Parked: []ParkedReport{},
	}
	if p := info.Proc; p != nil {
		f := p.Failure
		pr := &ProcReport{EnqueuedAt: p.EnqueuedAt, Attempts: f.Attempts, LastError: f.LastError,
			FirstFail: f.FirstAt, LastFail: f.LastAt, SkipAsked: f.Skipped}
		if json.Valid(p.Envelope) {
			pr.Body = p.Envelope
		} else {
			pr.Body, _ = json.Marshal(string(p.Envelope))
		}
		var h struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		if json.Unmarshal(p.Envelope, &h) == nil {
			pr.EventID, pr.Type = h.EventID, h.Type
		}
		r.Proc = pr
	}
	for _, pk := range st.Parked {
		var h struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(pk.Body, &h) // a report: an unreadable body shows no type
		r.Parked = append(r.Parked, ParkedReport{EventID: pk.EventID(), Type: h.Type, ParkedAt: pk.ParkedAt})
	}
	return r, nil
}

// Skip asks for the quarantine of the entity's event in proc (lockhandoff.Skip) and
// nudges a worker to resume the entity, so that a free turn acts on it at once; a held
// one acts when its run of the event ends. It returns the event that will be dead-lettered.
func Skip(ctx context.Context, rc redis.UniversalClient, prefix, entity string, nudge func(ctx context.Context, entity string) error) ([]byte, error) {
	env, err := lockhandoff.Skip(ctx, rc, prefix, entity)
	if err != nil {
		return nil, err
	}
	if err := nudge(ctx, entity); err != nil {
		return env, fmt.Errorf("order: skip %s: marked, but the nudge failed (the sweeper acts on it instead): %w", entity, err)
	}
	return env, nil
}
