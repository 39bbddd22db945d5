package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// Write is one Redis command that a handler commits with its turn's next step (see
// Commit). The command's keys come first in it, as in INCR k, SET k v, HSET k f v,
// RPUSH k v, LTRIM k start stop or DEL k1 k2; each key must carry the entity's hash tag
// (build it with Key), and none may be one of the turn's own keys. A key among Args
// escapes that check: keys go in Keys.
type Write struct {
	Cmd  string
	Keys []string
	// Args are the command's other arguments: strings, []byte, integers, floats or bools.
	Args []any
	// Done, when not nil, is called once the step's round trip is back, before the next
	// envelope's handler starts: with the command's reply when it was committed, or with
	// the reason when it was not (or when it is unknown whether it was).
	Done func(reply any, err error)
}

var (
	// ErrNotInTurn is Commit's answer outside a handler's context, or after its handler
	// returned: nothing was queued, and the caller writes itself.
	ErrNotInTurn = errors.New("lockhandoff: not the context of a running handler")
	// ErrOtherSlot is Commit's answer for a key without the entity's hash tag: the step's
	// script can only touch the entity's slot.
	ErrOtherSlot = errors.New("lockhandoff: key outside the entity's hash tag")
	// ErrBadWrite is Commit's answer for a write it cannot send: no command, an argument
	// of another type than Write.Args allows, or more than MaxWriteArgs keys and arguments.
	ErrBadWrite = errors.New("lockhandoff: bad write")
	// ErrWriteFailed is given to Write.Done when a committed write failed in Redis (a
	// wrong type, say). The step did not happen: the envelope stays in proc and is re-run.
	ErrWriteFailed = errors.New("lockhandoff: a write committed with the step failed")
)

// Commit queues writes to run inside the script of the turn's next step (the handoff to
// the next envelope, or the release of the turn), right after its token check. It saves
// a handler's last writes their own round trip: a hot entity then costs one round trip an
// event instead of two.
//
// The writes commit with the step as if the handler had made them before returning, with
// three differences:
//   - they are fenced: they run only while the turn is still this holder's, so a holder
//     that lost its lease cannot write;
//   - they are atomic with the step: the envelope leaves proc in the same script that made
//     its writes, so a crash between the two cannot re-run an envelope whose writes are
//     done;
//   - the handler does not see their replies before it returns (Write.Done gets them
//     after). A write that needs its reply to decide is made by the handler itself.
//
// A write that fails in Redis fails the envelope as a handler error would, after the
// retries: the step does not happen, the envelope stays in proc, the turn is left, and
// the sweeper re-runs it. Writes the script ran before the failed one stay done, as the
// writes of a handler that failed half-way do. A handler that returns an error has its
// writes dropped.
//
// Commit returns ErrNotInTurn when ctx is not a running handler's, ErrOtherSlot when a key
// lacks the entity's hash tag, and ErrBadWrite for a write it cannot send (see Write);
// then nothing was queued. The writes share a pipeline with other entities' steps, so a
// write that could not be encoded would fail theirs too: Commit checks every argument.
func Commit(ctx context.Context, writes ...Write) error {
	p, ok := ctx.Value(pendingKey{}).(*pending)
	if !ok {
		return ErrNotInTurn
	}
	for _, w := range writes {
		if err := p.check(w); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrNotInTurn
	}
	p.writes = append(p.writes, writes...)
	return nil
}

// hashTag is the part of key that Redis Cluster hashes: the text between the first '{'
// and the next '}' when it is not empty, else the whole key.
func hashTag(key string) string {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			return key[s+1 : s+1+e]
		}
	}
	return key
}

// MaxWriteArgs bounds a Write's keys and arguments together: Lua's unpack, which passes
// them to the command, fails past about 8,000, and outside pcall.
const MaxWriteArgs = 1024

type pendingKey struct{}

// pending collects one handler run's writes.
type pending struct {
	k      keys // the turn's own keys, which no write may touch
	tag    string
	mu     sync.Mutex
	closed bool
	writes []Write
}

func newPending(k keys) *pending { return &pending{k: k, tag: hashTag(k.lock)} }

// check returns why w cannot be committed, or nil.
func (p *pending) check(w Write) error {
	if w.Cmd == "" {
		return fmt.Errorf("%w: no command", ErrBadWrite)
	}
	if n := len(w.Keys) + len(w.Args); n > MaxWriteArgs {
		return fmt.Errorf("%w: %s with %d keys and arguments (at most %d)", ErrBadWrite, w.Cmd, n, MaxWriteArgs)
	}
	for _, k := range w.Keys {
		if hashTag(k) != p.tag {
			return fmt.Errorf("%w: %q (the entity's is {%s})", ErrOtherSlot, k, p.tag)
		}
		if k == p.k.lock || k == p.k.wait || k == p.k.proc || k == p.k.seq || k == p.k.waitBytes() {
			return fmt.Errorf("%w: %s on the turn's own key %q", ErrBadWrite, w.Cmd, k)
		}
	}
	for i, a := range w.Args {
		switch a.(type) {
		case string, []byte, bool, float32, float64,
			int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		default:
			return fmt.Errorf("%w: %s argument %d is a %T", ErrBadWrite, w.Cmd, i, a)
		}
	}
	return nil
}

// take closes p to later calls and returns what was queued.
func (p *pending) take() []Write {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	w := p.writes
	p.writes = nil
	return w
}

// writeArgs appends the writes' keys to keys and their encoding (see writes.lua) to args.
func writeArgs(writes []Write, keys []string, args []any) ([]string, []any) {
	args = append(args, len(writes))
	for _, w := range writes {
		keys = append(keys, w.Keys...)
		args = append(args, w.Cmd, len(w.Keys), len(w.Args))
		args = append(args, w.Args...)
	}
	return keys, args
}

// writeFailure is a step's answer {-2, i, message}.
type writeFailure struct {
	index int64
	msg   string
}

func (f *writeFailure) Error() string {
	return fmt.Sprintf("%v: write %d: %s", ErrWriteFailed, f.index, f.msg)
}

func (f *writeFailure) Unwrap() error { return ErrWriteFailed }

func parseWriteFailure(v []any) error {
	f := &writeFailure{}
	if len(v) >= 3 {
		f.index, _ = v[1].(int64)
		f.msg, _ = v[2].(string)
	}
	return f
}

// settle calls each write's Done with its reply from replies (the step's reply array),
// or with err. A Done that panics is logged, as a handler that panics is recovered: the
// caller still holds the turn.
func (h *Handoff) settle(writes []Write, replies any, err error) {
	rs, _ := replies.([]any)
	for i, w := range writes {
		if w.Done == nil {
			continue
		}
		var reply any
		if err == nil && i < len(rs) { // a nil reply is nil in the array, which stays whole
			reply = rs[i]
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					h.log.Error("lockhandoff: Write.Done panicked", zap.String("cmd", w.Cmd), zap.Any("panic", r))
				}
			}()
			w.Done(reply, err)
		}()
	}
}
