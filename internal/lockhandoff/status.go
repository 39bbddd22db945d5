package lockhandoff

import (
	"errors"
	"fmt"
)

// status is the first element of a script's reply. status.lua, prepended to every script
// that answers one, names the same values (STATUS_TURN is statusTurn); TestStatusesMatch
// holds the two together.
type status int64

// Zero and positive: the call did what it was sent for.
const (
	statusDone   status = 0 // handoff: wait was empty; proc cleared, lock deleted
	statusEmpty  status = 0 // resume: no backlog; nothing written
	statusTurn   status = 1 // take, resume: the caller holds the turn, on the entry returned
	statusNext   status = 1 // handoff: the turn moved on to the entry returned
	statusMarked status = 1 // skip: the envelope in proc is marked for quarantine
	statusQueued status = 2 // take: the envelope was appended to wait
)

// Negative: the call changed nothing (but the trims before a failed one); statusErrors
// maps each to its error.
const (
	statusLost       status = -1 // handoff, leave, attempts: lock is not the caller's
	statusTrimFailed status = -2 // handoff, leave: a committed trim failed (trims.lua)
	statusStale      status = -3 // handoff: seq moved on, this step ran already
	statusBusy       status = -4 // resume: another holder has the turn
	statusGone       status = -5 // attempts: proc no longer holds that entry
	statusFull       status = -6 // take: wait is at its bound
	statusNoEnvelope status = -7 // skip: proc is empty
)

var (
	errLeaseLost = errors.New("lockhandoff: lease lost")
	errStaleStep = errors.New("lockhandoff: the step ran already, its reply lost; trims' outcome unknown")
	errBusy      = errors.New("lockhandoff: another holder has the turn")
	errGone      = errors.New("lockhandoff: proc no longer holds the envelope")
)

// statusErrors maps the negative statuses to errors: the one place where the scripts'
// statuses become Go values. Callers match the errors with errors.Is.
var statusErrors = map[status]error{
	statusLost:       errLeaseLost,
	statusTrimFailed: ErrTrimFailed,
	statusStale:      errStaleStep,
	statusBusy:       errBusy,
	statusGone:       errGone,
	statusFull:       ErrQueueFull,
	statusNoEnvelope: ErrNothingToSkip,
}

// replyStatus returns the status of a reply v, and its error when the status is negative
// (nil otherwise). A failed trim's error says which trim failed and why:
// {STATUS_TRIM_FAILED, i, message}.
func replyStatus(v []any) (status, error) {
	if len(v) == 0 {
		return 0, errors.New("lockhandoff: empty script reply")
	}
	n, ok := v[0].(int64)
	if !ok {
		return 0, fmt.Errorf("lockhandoff: script reply %v without a status", v)
	}
	return status(n), statusError(status(n), v)
}

// statusError is the error of st (nil when st is not negative); v, when st is
// statusTrimFailed, is the reply that says which trim failed.
func statusError(st status, v []any) error {
	if st >= 0 {
		return nil
	}
	err, ok := statusErrors[st]
	if !ok {
		return fmt.Errorf("lockhandoff: unknown script status %d", st)
	}
	if st == statusTrimFailed && len(v) >= 3 {
		i, _ := v[1].(int64)
		msg, _ := v[2].(string)
		return fmt.Errorf("%w: trim %d: %s", err, i, msg)
	}
	return err
}
