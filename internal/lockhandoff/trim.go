package lockhandoff

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
)

var (
	// ErrNotInTurn is TrimWithStep's answer on a Turn no handler was given, or after its
	// handler returned: nothing was queued, and the caller trims itself.
	ErrNotInTurn = errors.New("lockhandoff: not the context of a running handler")
	// ErrOtherSlot is TrimWithStep's answer for a key without the entity's hash tag: the
	// step's script can only touch the entity's slot.
	ErrOtherSlot = errors.New("lockhandoff: key outside the entity's hash tag")
	// ErrBadTrim is TrimWithStep's answer for a trim it cannot send: a negative count, or
	// one of the turn's own keys.
	ErrBadTrim = errors.New("lockhandoff: bad trim")
	// ErrTrimFailed is given to a trim's done when it failed in Redis (the key holds no
	// list, say). The step did not happen: the envelope stays in proc and is re-run.
	ErrTrimFailed = errors.New("lockhandoff: a trim committed with the step failed")
)

// TrimWithStep drops the first n elements of the list key (LTRIM key n -1) inside the
// script of the turn's next step (the handoff to the next envelope, or the release of the
// turn), right after its token check. It saves a handler's last write its own round trip:
// the order processor trims the outbox it has just published this way, so a hot entity
// costs one round trip an event instead of two.
//
// The trim commits with the step as if the handler had made it before returning, with
// three differences:
//   - it is fenced: it runs only while the turn is still this holder's, so a holder that
//     lost its lease cannot trim;
//   - it is atomic with the step: the envelope leaves proc in the same script that trims,
//     so a crash between the two cannot re-run an envelope whose trim is done;
//   - its outcome comes after the round trip: done, when not nil, is called once the
//     step's reply is back and before the next envelope's handler starts, with nil when
//     the trim was committed, or with the reason when it was not (or when it is unknown
//     whether it was).
//
// A trim that fails in Redis fails the envelope as a handler error would, after the
// retries: the step does not happen, the envelope stays in proc, the turn is left, and the
// sweeper re-runs it. Trims the script ran before the failed one stay done, as the writes
// of a handler that failed half-way do. A handler that returns an error has its trims
// dropped (done gets the reason).
//
// key must carry the entity's hash tag (build it with Key). TrimWithStep returns
// ErrNotInTurn when t is not a running handler's, ErrOtherSlot when key lacks the
// entity's hash tag and ErrBadTrim for a negative n or one of the turn's own keys; then
// nothing was queued.
func (t Turn) TrimWithStep(key string, n int, done func(error)) error {
	p := t.trims
	if p == nil {
		return ErrNotInTurn
	}
	if err := p.check(key, n); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrNotInTurn
	}
	p.trims = append(p.trims, trim{key: key, n: n, done: done})
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

// trim is one TrimWithStep call.
type trim struct {
	key  string
	n    int
	done func(error)
}

// pending collects one handler run's trims.
type pending struct {
	k      keys // the turn's own keys, which no trim may touch
	tag    string
	mu     sync.Mutex
	closed bool
	trims  []trim
}

func newPending(k keys) *pending { return &pending{k: k, tag: hashTag(k.lock)} }

// check returns why key cannot be trimmed by n, or nil.
func (p *pending) check(key string, n int) error {
	if hashTag(key) != p.tag {
		return fmt.Errorf("%w: %q (the entity's is {%s})", ErrOtherSlot, key, p.tag)
	}
	if key == p.k.lock || key == p.k.wait || key == p.k.proc || key == p.k.seq || key == p.k.waitBytes() {
		return fmt.Errorf("%w: the turn's own key %q", ErrBadTrim, key)
	}
	if n < 0 {
		return fmt.Errorf("%w: %d elements of %q", ErrBadTrim, n, key)
	}
	return nil
}

// take closes p to later calls and returns what was queued.
func (p *pending) take() []trim {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	t := p.trims
	p.trims = nil
	return t
}

// trimArgs appends the trims' keys to keys and their counts (see trims.lua) to args.
func trimArgs(trims []trim, keys []string, args []any) ([]string, []any) {
	args = append(args, len(trims))
	for _, t := range trims {
		keys = append(keys, t.key)
		args = append(args, t.n)
	}
	return keys, args
}

// settle calls each trim's done with err. A done that panics is logged, as a handler that
// panics is recovered: the caller still holds the turn.
func (h *Handoff) settle(trims []trim, err error) {
	for _, t := range trims {
		if t.done == nil {
			continue
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					h.log.Error("lockhandoff: a trim's done panicked", zap.String("key", t.key), zap.Any("panic", r))
				}
			}()
			t.done(err)
		}()
	}
}
