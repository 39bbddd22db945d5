package order

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/queue"
)

// Reasons of a quarantine: the dead-letter reason of the envelope, and the reason of the
// rejected result that records what was undone.
const (
	// ReasonMaxAttempts dead-letters an event whose runs failed lockhandoff's MaxAttempts times.
	ReasonMaxAttempts = "ERR_MAX_ATTEMPTS"
	// ReasonSkipped dead-letters an event an operator took out of its turn (junbanctl turn skip).
	ReasonSkipped = "ERR_SKIPPED"
	// ReasonQuarantined is the reason of the result that records a quarantine's undos.
	ReasonQuarantined = "ERR_QUARANTINED"
)

// ReasonResultTooLarge dead-letters an event whose result would not fit in the results
// queue's messages (more lots than the line bound allows for, say): it can never be
// published, so the event is quarantined at its first run, its operations undone.
const ReasonResultTooLarge = "ERR_RESULT_TOO_LARGE"

// ResultTooLargeError is the processor's error for a step whose result would be larger
// than Config.MaxResultBytes. Step asks for the event's quarantine with it
// (lockhandoff.Result.Quarantine): nothing was committed, and no run of the event can do
// better.
type ResultTooLargeError struct {
	EventID      string
	Bytes, Limit int
}

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("%s: the result of %s would be %d bytes; the results queue takes %d", ReasonResultTooLarge, e.EventID, e.Bytes, e.Limit)
}

// Quarantine is lockhandoff.Handler's Quarantine: it takes an event that keeps failing (or
// that an operator skipped) out of its turn so that the entity's later events go on, and
// leaves nothing half-way:
//
//   - an event whose commit happened (its done marker exists) keeps its effect; its
//     results stay in the results list until SQS takes them (now, or with the entity's next
//     publish), and a redrive of it is a duplicate;
//   - otherwise the event's own ledger operations are undone. The step is run again on a
//     recording ledger (each operation a failed run made answers its remembered result;
//     one it never reached runs now), and what it moved is moved back. The commit that
//     follows records the undos in a rejected result (ERR_QUARANTINED, event id
//     "<event_id>~q<n>", see quarantineID, so PostgreSQL follows the SKUs' versions) and counts the quarantine
//     in domain.State.Requeued, so that a redrive of the event runs with fresh op ids and applies
//     once. An inventory event whose one operation moved stock and cannot be undone
//     (receive, adjust) is completed instead: its result is committed as a normal run's.
//
// The event goes to the orders DLQ first, with the reason and the last error, so nothing
// is lost if the worker dies in between (the next run quarantines it again; a second DLQ
// copy is a duplicate to a redrive).
func (p *Processor) Quarantine(ctx context.Context, t lockhandoff.Turn, envelope []byte, f lockhandoff.Failure) (lockhandoff.Result, error) {
	trims, err := p.quarantine(ctx, t, envelope, f)
	return lockhandoff.Result{Trims: trims}, err
}

func (p *Processor) quarantine(ctx context.Context, t lockhandoff.Turn, envelope []byte, f lockhandoff.Failure) ([]lockhandoff.Trim, error) {
	ev, err := domain.Decode(envelope, p.cfg.MaxEventBytes)
	if err != nil {
		return nil, p.dlq(ctx, envelope, domain.InvalidReason(err), nil)
	}
	if ev.Kind().Origin == domain.Nudge {
		return nil, nil
	}
	reason := quarantineReason(f)
	log := p.log.With(tracing.LogFields(ctx)...).With(zap.String("entity", t.Entity), zap.String("event_id", ev.EventID), zap.String("type", string(ev.Type)),
		zap.Int("attempts", f.Attempts), zap.Bool("skipped", f.Skipped), zap.String("last_error", f.LastError))

	vals, err := p.readTurn(ctx, t.Entity, ev.EventID)
	if err != nil {
		return nil, fmt.Errorf("order: quarantine %s: %w", ev.EventID, err)
	}
	if _, done := vals[0].(string); done {
		if err := p.dlq(ctx, envelope, reason+"; its effect was committed and stays", failureAttrs(f)); err != nil {
			return nil, err
		}
		trims, err := p.flush(ctx, t, nil)
		if err != nil {
			log.Warn("quarantined event's results stay in the outbox until the entity's next publish", zap.Error(err))
		}
		p.metrics.outcomes.WithLabelValues(string(ev.Type), "quarantined", "committed").Inc()
		log.Warn("event quarantined after its commit; its effect stays")
		return trims, nil
	}
	var st domain.State
	if raw, ok := vals[1].(string); ok {
		if st, err = domain.DecodeState([]byte(raw)); err != nil {
			return nil, fmt.Errorf("order: state of %s: %w", t.Entity, err)
		}
	}

	now := p.now()
	// One step ledger for the re-run and the undos: an undo on another primary waits for
	// the replicas of the re-run's last operation, as a step's own rollback does.
	l := p.stepLedger()
	run := domain.RerunEvent(ctx, l, p.cfg.Policy, st, ev, t.Seq, now)
	if run.Err != nil {
		log.Info("quarantine: the step failed again; undoing what it reached", zap.Error(run.Err))
	}
	if run.Completed && run.Err == nil && !run.Parked {
		// An inventory event's one operation applied: it cannot be undone, so the event
		// is completed. (Every inventory event has one operation only.)
		if err := p.dlq(ctx, envelope, reason+"; its stock operation had applied: completed", failureAttrs(f)); err != nil {
			return nil, err
		}
		if err := p.indexBefore(ctx, t.Entity, st, run.State, false); err != nil {
			return nil, err
		}
		pending, err := p.commit(ctx, t, ev, run.State, []event.Result{run.Result})
		if err != nil {
			return nil, err
		}
		p.unindexAfter(ctx, t.Entity, st, run.State)
		p.metrics.outcomes.WithLabelValues(string(ev.Type), "quarantined", "completed").Inc()
		log.Warn("event quarantined; its stock operation had applied and is kept")
		trims, err := p.flush(ctx, t, pending)
		if err != nil {
			log.Warn("quarantined event's result stays in the outbox until the entity's next publish", zap.Error(err))
		}
		return trims, nil
	}
	if run.Completed {
		return nil, fmt.Errorf("order: quarantine %s: an operation that cannot be undone applied, and the step fails: %w", ev.EventID, run.Err)
	}

	// Undo, newest first, what the event's runs moved and did not move back themselves.
	undone, err := run.Undo(ctx, l, ev)
	if err != nil {
		return nil, fmt.Errorf("order: quarantine %s: %w", ev.EventID, err)
	}

	if err := p.dlq(ctx, envelope, reason, failureAttrs(f)); err != nil {
		return nil, err
	}
	gen := st.Requeued[ev.EventID] + 1
	next := st
	next.Requeued = make(map[string]int, len(st.Requeued)+1)
	for k, v := range st.Requeued {
		next.Requeued[k] = v
	}
	next.Requeued[ev.EventID] = gen
	comps, err := compensation(event.Result{
		EventID: quarantineID(ev.EventID, gen), Entity: ev.Entity(), LCID: ev.LCID,
		Arrival: t.Seq, Type: ev.Type, Outcome: event.Rejected, Reason: ReasonQuarantined,
		Detail: reason, Order: st.Order, Moves: undone.Moves, ProcessedAt: now.UTC(),
	}, undone.SKUs, &next, p.cfg.MaxResultBytes)
	if err != nil {
		return nil, fmt.Errorf("order: quarantine %s: %w", ev.EventID, err)
	}
	// The compensation's own done marker guards the commit: after a crash, a second
	// quarantine of the same run commits a second generation, never the same twice.
	as := ev
	as.EventID = comps[0].EventID
	pending, err := p.commit(ctx, t, as, next, comps)
	if err != nil {
		return nil, err
	}
	if pending == nil {
		// commit.lua found the record's done marker set and wrote nothing. It is this
		// record's only when it holds this very record: the same script run again after
		// its reply was lost. Anything else holds the name, and the undos are in no state.
		if err := p.ownRecord(ctx, t.Entity, comps[0]); err != nil {
			p.metrics.outcomes.WithLabelValues(string(ev.Type), "quarantined", "name_taken").Inc()
			log.Error("quarantine not committed: its record's name is taken; the event stays in its turn", zap.String("record", comps[0].EventID), zap.Error(err))
			return nil, fmt.Errorf("order: quarantine %s: %w", ev.EventID, err)
		}
	}
	p.metrics.outcomes.WithLabelValues(string(ev.Type), "quarantined", "undone").Inc()
	log.Warn("event quarantined; its ledger operations were undone", zap.Int("undone", undone.Undone), zap.Int("generation", gen))
	trims, err := p.flush(ctx, t, pending)
	if err != nil {
		log.Warn("quarantine's result stays in the outbox until the entity's next publish", zap.Error(err))
	}
	return trims, nil
}

// compensation returns the results that record a quarantine's undos: base with every
// SKU version the undos left, each taking the next seq of st. A result must fit in limit
// bytes (the event was often quarantined for a result too large), so when base does not,
// the moves are left out (the undone operations and their undos move nothing in sum; the
// lots' buckets and versions are what PostgreSQL needs) and the lots of each SKU version
// are spread over as many results as they take, "<id>.1", "<id>.2", ...: PostgreSQL keeps
// each lot row at its own version, so a version's lots may arrive in several results.
func compensation(base event.Result, skus []stock.SKU, st *domain.State, limit int) ([]event.Result, error) {
	size := func(r event.Result) (int, error) {
		b, err := json.Marshal(r)
		return len(b), err
	}
	one := base
	one.SKUs = skus
	one.Seq = st.Seq + 1
	n, err := size(one)
	if err != nil {
		return nil, err
	}
	if n <= limit {
		st.Seq++
		return []event.Result{one}, nil
	}
	base.Moves = nil
	var out []event.Result
	cur := base
	for _, s := range skus {
		for _, lot := range s.Lots {
			try := withLot(cur, s, lot)
			if n, err = size(try); err != nil {
				return nil, err
			}
			if n > limit && len(cur.SKUs) > 0 {
				out = append(out, cur)
				try = withLot(base, s, lot)
				if n, err = size(try); err != nil {
					return nil, err
				}
			}
			if n > limit {
				return nil, fmt.Errorf("a result with one lot is %d bytes, over the limit of %d", n, limit)
			}
			cur = try
		}
	}
	out = append(out, cur)
	for i := range out {
		st.Seq++
		out[i].Seq = st.Seq
		if len(out) > 1 {
			out[i].EventID = boundedResultID(base.EventID + "." + strconv.Itoa(i+1))
		}
	}
	return out, nil
}

// withLot returns r with lot added to SKU s's entry at s's version (a new entry when r
// has none), leaving r's own slices as they are.
func withLot(r event.Result, s stock.SKU, lot stock.Lot) event.Result {
	r.SKUs = slices.Clone(r.SKUs)
	if n := len(r.SKUs); n > 0 && r.SKUs[n-1].SKU == s.SKU && r.SKUs[n-1].Version == s.Version {
		last := r.SKUs[n-1]
		last.Lots = append(slices.Clone(last.Lots), lot)
		r.SKUs[n-1] = last
		return r
	}
	e := s
	e.Lots = []stock.Lot{lot}
	r.SKUs = append(r.SKUs, e)
	return r
}

// ErrRecordNameTaken: the done marker of a quarantine's record holds another record, so
// the quarantine cannot commit. No sender's event can take the name (event.OwnMark); a
// marker left from before senders were refused it can.
var ErrRecordNameTaken = errors.New("order: the name of the quarantine's record is taken")

// ownRecord returns nil when r's done marker holds r itself, ErrRecordNameTaken otherwise.
func (p *Processor) ownRecord(ctx context.Context, entity string, r event.Result) error {
	body, err := domain.Marshal(r)
	if err != nil {
		return err
	}
	held, err := p.shared.Get(ctx, doneKey(p.cfg.Prefix, entity, r.EventID)).Bytes()
	if err != nil {
		return fmt.Errorf("order: the done marker of %s: %w", r.EventID, err)
	}
	if !bytes.Equal(held, body) {
		return fmt.Errorf("%w: %s holds %.80q", ErrRecordNameTaken, r.EventID, held)
	}
	return nil
}

// quarantineID is the event id of the result of an event's gen-th quarantine:
// "<event_id>~q<gen>" (event.OwnMark, which no sender's id holds), or a hash in the same
// namespace when that is longer than a result's event id may be (event.MaxIDLength).
func quarantineID(eventID string, gen int) string {
	return boundedResultID(eventID + event.OwnMark + "q" + strconv.Itoa(gen))
}

// boundedResultID is id, or "~h:" and its SHA-256 when id is longer than a result's
// event id may be: junban's own namespace, so that no sender's event id is ever the hash
// of one of junban's records.
func boundedResultID(id string) string {
	if len(id) <= event.MaxIDLength {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return event.OwnMark + "h:" + hex.EncodeToString(sum[:])
}

// failureAttrs are the dead-letter attributes of a quarantined event: its failed runs and
// when the first and the last of them were counted (junban-api and the console show them).
func failureAttrs(f lockhandoff.Failure) map[string]string {
	a := map[string]string{queue.AttrAttempts: strconv.Itoa(f.Attempts)}
	if !f.FirstAt.IsZero() {
		a[queue.AttrFirstFailure] = f.FirstAt.UTC().Format(time.RFC3339Nano)
	}
	if !f.LastAt.IsZero() {
		a[queue.AttrLastFailure] = f.LastAt.UTC().Format(time.RFC3339Nano)
	}
	return a
}

// quarantineReason is the DLQ reason of a quarantined event: its code and the last error.
func quarantineReason(f lockhandoff.Failure) string {
	if f.Immediate {
		// The handler's own error, which starts with its reason code.
		if i := strings.Index(f.LastError, ReasonResultTooLarge); i >= 0 {
			return f.LastError[i:]
		}
		return f.LastError
	}
	if f.Skipped {
		return fmt.Sprintf("%s: skipped by an operator after %d failed runs; last error: %s", ReasonSkipped, f.Attempts, f.LastError)
	}
	return fmt.Sprintf("%s: %d failed runs; last error: %s", ReasonMaxAttempts, f.Attempts, f.LastError)
}
