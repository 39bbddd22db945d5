package lockhandoff

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Defaults of the quarantine's Config fields. With HandlerRetries' default, ten failed
// calls are the envelope's fourth turn; the minimum age keeps an outage shorter than a
// minute (PostgreSQL restarting, a failover) from quarantining the events it fails.
const (
	MaxAttemptsDefault      = 10
	QuarantineMinAgeDefault = time.Minute
)

// attemptsRetention keeps an envelope's failure count. It outlives every re-run spacing
// (the sweep interval), so a count is never forgotten while its envelope keeps failing;
// the hash of an envelope that failed and then succeeded expires after it.
const attemptsRetention = 7 * 24 * time.Hour

// maxErrorText bounds the error text kept per envelope (and passed to Quarantine).
const maxErrorText = 1024

// attemptsKey is the hash of the failed runs of the entity's envelope in proc.
func attemptsKey(prefix, entity string) string { return Key(prefix, entity, "attempts") }

// Failure is what the turn knows of an envelope's failed runs: Handler.Quarantine gets it,
// and Inspect shows it.
type Failure struct {
	// Attempts counts the failed handler calls of the envelope, across turns and workers.
	Attempts int
	// LastError is the newest failure's error text.
	LastError string
	// FirstAt and LastAt are when the first and the newest failure were counted (Redis clock).
	FirstAt, LastAt time.Time
	// Skipped is true when an operator asked for the envelope's quarantine (Skip).
	Skipped bool
	// Immediate is true when the Step's Result asked for the quarantine; LastError is its
	// error's text.
	Immediate bool
}

// ErrNothingToSkip is Skip's answer when the entity has no envelope in proc.
var ErrNothingToSkip = errors.New("lockhandoff: no envelope in proc")

func digest(raw []byte) string {
	sum := sha1.Sum(raw)
	return hex.EncodeToString(sum[:])
}

// recordFailure counts a failed run of e in the entity's slot, fenced by the turn's
// token. It returns the count so far and whether an operator asked for a skip; ok is false
// when nothing was counted (the turn or the envelope moved on, or Redis failed: the next
// run counts again).
func (h *Handoff) recordFailure(l *lease, e entry, cause error) (f Failure, ok bool) {
	ctx, cancel := h.bookkeepingCtx(context.Background())
	defer cancel()
	text := errorText(cause)
	v, err := attemptsScript.Run(ctx, h.shared, []string{l.k.lock, l.k.proc, attemptsKey(h.cfg.Prefix, l.entity)},
		l.token, digest(e.raw), text, attemptsRetention.Milliseconds(), newToken()).Int64Slice()
	if err == nil && len(v) < 1 {
		err = errors.New("empty reply")
	}
	if err == nil {
		err = statusError(status(v[0]), nil) // a count, or a negative status
	}
	switch {
	case errors.Is(err, errLeaseLost), errors.Is(err, errGone):
		return Failure{}, false // the turn or the envelope moved on
	case err != nil:
		h.log.Warn("lockhandoff: failure not counted", zap.String("lcid", l.entity), zap.Error(err))
		return Failure{}, false
	}
	f = Failure{Attempts: int(v[0]), LastError: text, Skipped: len(v) > 1 && v[1] == 1}
	if len(v) >= 4 {
		f.FirstAt, f.LastAt = time.UnixMilli(v[2]).UTC(), time.UnixMilli(v[3]).UTC()
	}
	return f, true
}

// readFailure reads the failure count of the envelope e (the zero Failure when it has none).
func readFailure(ctx context.Context, rc Commands, prefix, entity string, raw []byte) (Failure, error) {
	m, err := rc.HGetAll(ctx, attemptsKey(prefix, entity)).Result()
	if err != nil {
		return Failure{}, err
	}
	if m["entry"] != digest(raw) {
		return Failure{}, nil
	}
	n, _ := strconv.Atoi(m["n"])
	return Failure{
		Attempts: n, LastError: m["err"], Skipped: m["skip"] == "1",
		FirstAt: msTime(m["first_at"]), LastAt: msTime(m["last_at"]),
	}, nil
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func errorText(err error) string {
	s := "unknown error"
	if err != nil {
		s = err.Error()
	}
	if len(s) <= maxErrorText {
		return s
	}
	s = s[:maxErrorText]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// due reports whether f takes its envelope out of the turn: an operator's skip, or
// MaxAttempts failures spread over at least QuarantineMinAge (by the Redis clock).
func (h *Handoff) due(f Failure) bool {
	if h.cfg.NeverQuarantine {
		return false
	}
	return f.Skipped || (f.Attempts >= h.cfg.MaxAttempts && f.LastAt.Sub(f.FirstAt) >= h.cfg.QuarantineMinAge)
}

// quarantine hands e to Handler.Quarantine. handledOK moves the turn on (the envelope
// leaves proc with the step that follows, with the trims returned); handledFailed leaves
// it in proc, to be quarantined by its next run.
func (h *Handoff) quarantine(l *lease, e entry, f Failure) (handled, []Trim) {
	deadline := time.Now().Add(h.cfg.HandlerDeadline)
	l.setDeadline(deadline)
	qctx, cancel := context.WithDeadlineCause(l.ctx, deadline, errDeadline)
	t := Turn{Entity: l.entity, Seq: e.seq, Token: l.token, Rerun: true, k: l.k}
	res, err := callQuarantine(h.handler, qctx, t, e.envelope, f)
	cancel()
	if err == nil {
		err = checkTrims(l.k, res.Trims)
	}
	trims := res.Trims
	l.setDeadline(time.Time{})
	switch {
	case l.isLost():
		h.settle(l.entity, e.envelope, trims, errLeaseLost)
		return handledLost, nil
	case err != nil:
		h.settle(l.entity, e.envelope, trims, errDropped)
		h.m.failed.Inc()
		h.log.Warn("lockhandoff: quarantine failed; envelope left in proc",
			zap.String("lcid", l.entity), zap.Int64("seq", e.seq), zap.Int("attempts", f.Attempts), zap.Error(err))
		return handledFailed, nil
	}
	h.m.quarantined.Inc()
	h.log.Warn("lockhandoff: envelope quarantined; the turn moves on",
		zap.String("lcid", l.entity), zap.Int64("seq", e.seq), zap.Int("attempts", f.Attempts),
		zap.Bool("skipped", f.Skipped), zap.String("last_error", f.LastError))
	return handledOK, trims
}

func callQuarantine(h Handler, ctx context.Context, t Turn, envelope []byte, f Failure) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = Result{}, fmt.Errorf("lockhandoff: quarantine panicked: %v", r)
		}
	}()
	return h.Quarantine(ctx, t, envelope, f)
}

// TurnInfo is what Inspect reads of an entity's turn.
type TurnInfo struct {
	Entity string `json:"entity"`
	// Holder is the lock's token ("" when the turn is free) and LeaseLeft its TTL.
	Holder    string        `json:"holder,omitempty"`
	LeaseLeft time.Duration `json:"lease_left_ns,omitempty"`
	// Seq is the fencing sequence of the newest envelope that entered proc.
	Seq int64 `json:"seq"`
	// Proc is the envelope in proc, nil when none.
	Proc *ProcInfo `json:"proc,omitempty"`
	// WaitDepth is LLEN wait.
	WaitDepth int64 `json:"wait_depth"`
}

// ProcInfo is the envelope in proc.
type ProcInfo struct {
	Envelope   []byte    `json:"-"`
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Failure counts its failed runs (zero when none failed).
	Failure Failure `json:"failure"`
}

// Inspect reads an entity's turn: the holder, the fencing seq, the envelope in proc with
// its failed runs, and the depth of the wait list. It writes nothing.
func Inspect(ctx context.Context, rc redis.UniversalClient, prefix, entity string) (TurnInfo, error) {
	if err := CheckEntity(entity); err != nil {
		return TurnInfo{}, err
	}
	k := keys{Key(prefix, entity, "lock"), Key(prefix, entity, "wait"), Key(prefix, entity, "proc"), Key(prefix, entity, "seq")}
	pipe := rc.Pipeline()
	lock := pipe.Get(ctx, k.lock)
	ttl := pipe.PTTL(ctx, k.lock)
	seq := pipe.Get(ctx, k.seq)
	proc := pipe.LIndex(ctx, k.proc, 0)
	wait := pipe.LLen(ctx, k.wait)
	fails := pipe.HGetAll(ctx, attemptsKey(prefix, entity))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return TurnInfo{}, fmt.Errorf("lockhandoff: inspect %s: %w", entity, err)
	}
	info := TurnInfo{Entity: entity, Holder: lock.Val(), WaitDepth: wait.Val()}
	if info.Holder != "" {
		info.LeaseLeft = max(ttl.Val(), 0)
	}
	info.Seq, _ = strconv.ParseInt(seq.Val(), 10, 64)
	if raw := proc.Val(); raw != "" {
		e, err := parseEntry(nil, raw, nil, nil)
		if err != nil {
			return TurnInfo{}, fmt.Errorf("lockhandoff: inspect %s: %w", entity, err)
		}
		pi := &ProcInfo{Envelope: e.envelope, EnqueuedAt: time.UnixMilli(e.enqMs).UTC()}
		if m := fails.Val(); m["entry"] == digest(e.raw) {
			n, _ := strconv.Atoi(m["n"])
			pi.Failure = Failure{Attempts: n, LastError: m["err"], Skipped: m["skip"] == "1",
				FirstAt: msTime(m["first_at"]), LastAt: msTime(m["last_at"])}
		}
		info.Proc = pi
	}
	return info, nil
}

// Skip marks the entity's envelope in proc for quarantine and returns it: the worker that
// runs it next (a holder whose run of it fails, a Resume or the sweeper's re-run) takes it
// out of the turn through Handler.Quarantine instead of running it. Send a drain nudge for
// the entity after it, so that a free turn is resumed at once. ErrNothingToSkip: proc is
// empty.
func Skip(ctx context.Context, rc redis.UniversalClient, prefix, entity string) ([]byte, error) {
	if err := CheckEntity(entity); err != nil {
		return nil, err
	}
	v, err := skipScript.Run(ctx, rc, []string{Key(prefix, entity, "proc"), attemptsKey(prefix, entity)},
		attemptsRetention.Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("lockhandoff: skip %s: %w", entity, err)
	}
	st, err := replyStatus(v)
	if err == nil && (st != statusMarked || len(v) < 2) {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		return nil, fmt.Errorf("lockhandoff: skip %s: %w", entity, err) // ErrNothingToSkip: proc is empty
	}
	e, err := parseEntry(nil, v[1], nil, nil)
	if err != nil {
		return nil, fmt.Errorf("lockhandoff: skip %s: %w", entity, err)
	}
	return e.envelope, nil
}
