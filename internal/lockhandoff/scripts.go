package lockhandoff

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/redisscript"
)

var (
	// status.lua names the statuses (see status.go), and clock.lua defines nowMillis, the
	// server's time; the scripts that answer a status or read the time run with them
	// prepended.
	//go:embed status.lua
	statusSrc string
	//go:embed clock.lua
	clockSrc string
	//go:embed take.lua
	takeSrc    string
	takeScript = redis.NewScript(statusSrc + clockSrc + takeSrc)
	//go:embed trims.lua
	trimsSrc string
	//go:embed handoff.lua
	handoffSrc    string
	handoffScript = redis.NewScript(statusSrc + clockSrc + trimsSrc + handoffSrc)
	//go:embed leave.lua
	leaveSrc    string
	leaveScript = redis.NewScript(statusSrc + trimsSrc + leaveSrc)
	//go:embed renew.lua
	renewSrc    string
	renewScript = redis.NewScript(renewSrc)
	//go:embed resume.lua
	resumeSrc    string
	resumeScript = redis.NewScript(statusSrc + clockSrc + resumeSrc)
	//go:embed state.lua
	stateSrc    string
	stateScript = redis.NewScript(stateSrc)
	//go:embed attempts.lua
	attemptsSrc    string
	attemptsScript = redis.NewScript(statusSrc + clockSrc + attemptsSrc)
	//go:embed skip.lua
	skipSrc    string
	skipScript = redis.NewScript(statusSrc + clockSrc + skipSrc)
	//go:embed forget.lua
	forgetSrc    string
	forgetScript = redis.NewScript(forgetSrc)
)

// entry is an envelope as it left wait or proc: "<enqueued_at_ms>:<envelope>".
type entry struct {
	seq      int64
	raw      []byte // the whole entry, as in proc
	envelope []byte
	enqMs    int64 // when it was pushed, server clock
	nowMs    int64 // when it entered proc (or was read from it), server clock
	depth    int64 // LLEN wait after the move
	rerun    bool  // left in proc by an earlier holder
	// sent is when the script that gave the turn was sent (local clock): the lock's TTL
	// runs from no earlier than this, however late its reply came.
	sent time.Time
}

func parseEntry(seq any, raw any, now any, depth any) (entry, error) {
	s, ok := raw.(string)
	if !ok {
		return entry{}, fmt.Errorf("unexpected entry %T", raw)
	}
	b := []byte(s)
	i := bytes.IndexByte(b, ':')
	if i < 0 {
		return entry{}, fmt.Errorf("malformed entry without timestamp")
	}
	enq, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil {
		return entry{}, fmt.Errorf("malformed entry timestamp: %w", err)
	}
	e := entry{raw: b, envelope: b[i+1:], enqMs: enq}
	e.seq, _ = seq.(int64)
	e.nowMs, _ = now.(int64)
	e.depth, _ = depth.(int64)
	return e, nil
}

type takeResult struct {
	status status // statusTurn, statusQueued or statusFull
	depth  int64
	first  entry // on takeTurn
}

// waitBytes is the key of the byte count of the entity's wait list (see take.lua):
// Key(prefix, entity, "waitbytes"), in the entity's slot.
func (k keys) waitBytes() string { return k.wait + "bytes" }

// pushed is the key of the push marker of the take with token (see take.lua):
// Key(prefix, entity, "pushed:<token>"), in the entity's slot.
func (k keys) pushed(token string) string {
	return strings.TrimSuffix(k.wait, "wait") + "pushed:" + token
}

// pushMemory is how long a take's push marker lives: far longer than go-redis's retries
// of one call (MaxRetries, each after a read timeout and a backoff), so a take sent again
// after its reply was lost never appends its envelope a second time.
const pushMemory = time.Minute

// takeAndIndex runs take.lua and, in the same round trip, refreshes the entity's backlog
// index entry. The push counts as done only when both succeeded.
func (h *Handoff) takeAndIndex(ctx context.Context, entity string, k keys, token string, envelope []byte) (takeResult, error) {
	ks := []string{k.lock, k.wait, k.proc, k.seq, k.waitBytes(), k.pushed(token)}
	args := []any{token, h.cfg.LockTTL.Milliseconds(), h.cfg.MaxWait, envelope, h.cfg.MaxWaitBytes, pushMemory.Milliseconds()}
	z := redis.Z{Score: float64(h.cfg.Now().UnixMilli()), Member: entity}
	shard := h.indexShard(entity)

	var tc *redis.Cmd
	var zc *redis.IntCmd
	sent := time.Now()
	acked := h.batch.doDurable(ctx, k.lock, shard,
		func(ctx context.Context, p redis.Pipeliner) { tc = takeScript.EvalSha(ctx, p, ks, args...) },
		func(ctx context.Context, p redis.Pipeliner) { zc = p.ZAdd(ctx, shard, z) })
	if redisscript.NoScript(tc) {
		// The script did not run; the index entry written meanwhile only costs a look.
		acked = h.cfg.Replication.Pipelined(ctx, h.rc, k.lock, "take", func(p redis.Pipeliner) {
			tc = takeScript.Eval(ctx, p, ks, args...)
		})
		shardAck := h.cfg.Replication.Pipelined(ctx, h.rc, shard, "take", func(p redis.Pipeliner) {
			zc = p.ZAdd(ctx, shard, z)
		})
		acked = cmp.Or(acked, shardAck)
	}
	v, err := tc.Slice()
	if err != nil {
		return takeResult{}, err
	}
	r, err := parseTake(v)
	if err != nil {
		return takeResult{}, err
	}
	r.first.sent = sent
	if acked != nil && r.status != statusFull {
		if r.status == statusTurn {
			// Not yet durable: the caller keeps its message, and its redelivery finds the
			// envelope in proc (or in wait) and runs it from there.
			h.leave(entity, k, token, false, false)
		}
		return takeResult{}, fmt.Errorf("take not replicated: %w", acked)
	}
	if err := zc.Err(); err != nil && r.status != statusFull {
		if r.status == statusTurn {
			// Without its index entry the backlog could be orphaned if we died now: give
			// the turn back (the envelope stays in Redis) and let the redelivery of the
			// caller's message queue it again, with its entry.
			h.leave(entity, k, token, false, false)
		}
		return takeResult{}, fmt.Errorf("backlog index: %w", err)
	}
	return r, nil
}

// parseTake reads take.lua's reply. FULL is a result, not an error here: Submit answers
// its error (statusErrors), and the take's other checks do not apply to it.
func parseTake(v []any) (takeResult, error) {
	if len(v) < 2 {
		return takeResult{}, fmt.Errorf("take: unexpected reply %v", v)
	}
	st, _ := replyStatus(v)
	switch st {
	case statusQueued, statusFull:
		d, _ := v[1].(int64)
		return takeResult{status: st, depth: d}, nil
	case statusTurn:
		if len(v) < 6 {
			return takeResult{}, fmt.Errorf("take: unexpected reply %v", v)
		}
		e, err := parseEntry(v[1], v[2], v[3], v[4])
		if err != nil {
			return takeResult{}, fmt.Errorf("take: %w", err)
		}
		rerun, _ := v[5].(int64)
		e.rerun = rerun == 1
		return takeResult{status: statusTurn, depth: e.depth, first: e}, nil
	}
	return takeResult{}, fmt.Errorf("take: unexpected status %v", v[0])
}

// runHandoff runs handoff.lua for the envelope of seq, committing trims first (see
// Trim). more says the turn moved on to next; without it, the turn was released.
// An error from statusErrors means nothing changed: ErrTrimFailed (a trim failed),
// errLeaseLost, or errStaleStep (the step for seq ran already: a retried round trip).
func (h *Handoff) runHandoff(ctx context.Context, k keys, token string, seq int64, trims []Trim) (next entry, more bool, err error) {
	ks, args := trimArgs(trims, []string{k.lock, k.wait, k.proc, k.seq, k.waitBytes()}, []any{token, h.cfg.LockTTL.Milliseconds(), seq})
	v, err := h.evalShared(ctx, handoffScript, ks, args...).Slice()
	if err != nil {
		return entry{}, false, err
	}
	st, err := replyStatus(v)
	switch {
	case err != nil:
		return entry{}, false, err
	case st == statusDone:
		return entry{}, false, nil
	case st == statusNext && len(v) >= 5:
		next, err = parseEntry(v[1], v[2], v[3], v[4])
		return next, err == nil, err
	}
	return entry{}, false, fmt.Errorf("handoff: unexpected reply %v", v)
}

// runResume takes a free turn with a backlog; ok is false when the turn is held or
// nothing waits.
func (h *Handoff) runResume(ctx context.Context, k keys, token string) (entry, bool, error) {
	sent := time.Now()
	v, err := resumeScript.Run(ctx, h.shared, []string{k.lock, k.wait, k.proc, k.seq, k.waitBytes()}, token, h.cfg.LockTTL.Milliseconds()).Slice()
	if err != nil {
		return entry{}, false, err
	}
	st, err := replyStatus(v)
	switch {
	case errors.Is(err, errBusy), err == nil && st == statusEmpty:
		return entry{}, false, nil
	case err != nil:
		return entry{}, false, err
	case st != statusTurn || len(v) < 6:
		return entry{}, false, fmt.Errorf("resume: unexpected reply %v", v)
	}
	e, err := parseEntry(v[1], v[2], v[3], v[4])
	if err != nil {
		return entry{}, false, fmt.Errorf("resume: %w", err)
	}
	rerun, _ := v[5].(int64)
	e.rerun = rerun == 1
	e.sent = sent
	return e, true, nil
}

// runLeave releases the turn token-checked, committing trims first (see Trim);
// done removes the envelope in proc. It returns the backlog left. An error from
// statusErrors means nothing changed: errLeaseLost (the lock was not ours) or
// ErrTrimFailed.
func (h *Handoff) runLeave(ctx context.Context, k keys, token string, done bool, trims []Trim) (left int64, err error) {
	d := "0"
	if done {
		d = "1"
	}
	ks, args := trimArgs(trims, []string{k.lock, k.wait, k.proc}, []any{token, d})
	v, err := h.evalShared(ctx, leaveScript, ks, args...).Slice()
	if err != nil {
		return 0, err
	}
	st, err := replyStatus(v)
	if err != nil {
		return 0, err
	}
	return int64(st), nil // not a status: the backlog left
}

// evalShared runs s in a shared pipeline (see batcher). When the server did not know the
// script yet, s did not run: it runs again alone, and EVAL loads it.
func (h *Handoff) evalShared(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	var c *redis.Cmd
	h.batch.do(ctx, func(ctx context.Context, p redis.Pipeliner) {
		c = s.EvalSha(ctx, p, keys, args...)
	})
	if redisscript.NoScript(c) {
		c = s.Run(ctx, h.shared, keys, args...)
	}
	return c
}

func (h *Handoff) runRenew(ctx context.Context, k keys, token string) (bool, error) {
	n, err := renewScript.Run(ctx, h.shared, []string{k.lock}, token, h.cfg.LockTTL.Milliseconds()).Int64()
	return n == 1, err
}
