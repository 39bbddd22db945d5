package lockhandoff

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
)

// Handler runs a turn's envelopes. The turn calls Step for each envelope, in the order
// they reached the entity, and Quarantine for an envelope it takes out of the turn (after
// Config.MaxAttempts failed runs, an operator's Skip, or a Step that asked for it). Each
// returns what the turn must write with its next step (the handoff to the next envelope,
// or the release): see Result.
//
// Both must be idempotent: an envelope is re-run after a crash, a failure or a lost
// lease. Their ctx is cancelled when the lease is lost or the call passes
// Config.HandlerDeadline. An error leaves the envelope in proc to be re-run (from
// Quarantine: it counts as another failed run), and drops the Result's trims.
type Handler interface {
	Step(ctx context.Context, t Turn, envelope []byte) (Result, error)
	// Quarantine must leave the entity as if the envelope had never run, or as if it
	// had run to the end (the event's own rules: see internal/order), and put the
	// envelope where an operator finds it (a dead-letter queue). A nil error moves the
	// turn on to the next envelope.
	Quarantine(ctx context.Context, t Turn, envelope []byte, f Failure) (Result, error)
}

// Result is what a run of an envelope returns to its turn.
type Result struct {
	// Trims are written by the script of the turn's next step, right after its token
	// check (see Trim). They are read only with a nil error.
	Trims []Trim
	// Quarantine, read only with an error, says that no run of the envelope can ever
	// succeed (its result can never be published, say): the envelope goes to
	// Handler.Quarantine at once, without MaxAttempts or QuarantineMinAge, as
	// Failure.Immediate with the error's text.
	Quarantine bool
}

// Trim drops the first N elements of the list Key (LTRIM Key N -1) inside the script of
// the turn's next step. It saves a handler's last write its own round trip: the order
// processor trims the results list it has just published this way, so a hot entity costs one
// round trip an event instead of two.
//
// A trim commits with the step as if the handler had made it before returning, with
// three differences:
//   - it is fenced: it runs only while the turn is still this holder's, so a holder that
//     lost its lease cannot trim;
//   - it is atomic with the step: the envelope leaves proc in the same script that trims,
//     so a crash between the two cannot re-run an envelope whose trim is done;
//   - it happens after the run returned: the next envelope's run starts once it is done.
//
// A trim that fails in Redis (the key holds no list, say) fails the envelope as a
// handler error would, after the retries: the step does not happen, the envelope stays
// in proc, the turn is left, and the sweeper re-runs it. Trims the script ran before the
// failed one stay done, as the writes of a handler that failed half-way do. A returned
// trim the step cannot send (see Turn.Trim) fails the run.
type Trim struct {
	Key string
	N   int
}

var (
	// ErrNotInTurn is Trim's answer on a Turn no handler was given: the caller trims itself.
	ErrNotInTurn = errors.New("lockhandoff: not the turn of a running handler")
	// ErrOtherSlot is Trim's answer for a key without the entity's hash tag: the step's
	// script can only touch the entity's slot.
	ErrOtherSlot = errors.New("lockhandoff: key outside the entity's hash tag")
	// ErrBadTrim is Trim's answer for a trim the step cannot send: a negative count, or
	// one of the turn's own keys.
	ErrBadTrim = errors.New("lockhandoff: bad trim")
	// ErrTrimFailed is the reason Hooks.AfterTrims gets when a trim failed in Redis. The
	// step did not happen: the envelope stays in proc and is re-run.
	ErrTrimFailed = errors.New("lockhandoff: a trim committed with the step failed")
)

// Trim returns the Trim of the first n elements of the list key, checked against t: key
// must carry the entity's hash tag (build it with Key). It returns ErrNotInTurn when t is
// not a running handler's, ErrOtherSlot when key lacks the entity's hash tag and ErrBadTrim
// for a negative n or one of the turn's own keys.
func (t Turn) Trim(key string, n int) (Trim, error) {
	if t.k.lock == "" {
		return Trim{}, ErrNotInTurn
	}
	tr := Trim{Key: key, N: n}
	return tr, checkTrim(t.k, tr)
}

// StepFunc is a Handler of one function, for a turn that never quarantines
// (Config.NeverQuarantine): its Quarantine fails.
type StepFunc func(ctx context.Context, t Turn, envelope []byte) (Result, error)

// Step calls f.
func (f StepFunc) Step(ctx context.Context, t Turn, envelope []byte) (Result, error) {
	return f(ctx, t, envelope)
}

// Quarantine fails: a StepFunc cannot take an envelope out of its turn.
func (f StepFunc) Quarantine(context.Context, Turn, []byte, Failure) (Result, error) {
	return Result{}, errors.New("lockhandoff: a StepFunc does not quarantine (set Config.NeverQuarantine)")
}

// Funcs is a Handler of two functions.
type Funcs struct {
	OnStep       func(ctx context.Context, t Turn, envelope []byte) (Result, error)
	OnQuarantine func(ctx context.Context, t Turn, envelope []byte, f Failure) (Result, error)
}

// Step calls f.OnStep.
func (f Funcs) Step(ctx context.Context, t Turn, envelope []byte) (Result, error) {
	return f.OnStep(ctx, t, envelope)
}

// Quarantine calls f.OnQuarantine.
func (f Funcs) Quarantine(ctx context.Context, t Turn, envelope []byte, fl Failure) (Result, error) {
	return f.OnQuarantine(ctx, t, envelope, fl)
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

// checkTrim returns why tr cannot be sent with the step of the turn of k, or nil.
func checkTrim(k keys, tr Trim) error {
	if tag := hashTag(k.lock); hashTag(tr.Key) != tag {
		return fmt.Errorf("%w: %q (the entity's is {%s})", ErrOtherSlot, tr.Key, tag)
	}
	if tr.Key == k.lock || tr.Key == k.wait || tr.Key == k.proc || tr.Key == k.seq || tr.Key == k.waitBytes() {
		return fmt.Errorf("%w: the turn's own key %q", ErrBadTrim, tr.Key)
	}
	if tr.N < 0 {
		return fmt.Errorf("%w: %d elements of %q", ErrBadTrim, tr.N, tr.Key)
	}
	return nil
}

// checkTrims returns why one of trims cannot be sent, or nil.
func checkTrims(k keys, trims []Trim) error {
	for _, tr := range trims {
		if err := checkTrim(k, tr); err != nil {
			return err
		}
	}
	return nil
}

// trimArgs appends the trims' keys to keys and their counts (see trims.lua) to args.
func trimArgs(trims []Trim, keys []string, args []any) ([]string, []any) {
	args = append(args, len(trims))
	for _, t := range trims {
		keys = append(keys, t.Key)
		args = append(args, t.N)
	}
	return keys, args
}

// settle tells Hooks.AfterTrims what became of the trims a run of envelope returned. A hook
// that panics is logged: the caller still holds the turn.
func (h *Handoff) settle(entity string, envelope []byte, trims []Trim, err error) {
	hook := h.cfg.Hooks.AfterTrims
	if hook == nil || len(trims) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			h.log.Error("lockhandoff: AfterTrims panicked", zap.String("lcid", entity), zap.Any("panic", r))
		}
	}()
	hook(entity, envelope, err)
}
