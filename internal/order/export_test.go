package order

import (
	"context"
	"time"
)

// SetCrash makes p's steps fail where crash says (see Processor.crash).
func SetCrash(p *Processor, crash func(point string) error) { p.crash = crash }

// DoneKey is the key of an entity's done marker for an event id.
var DoneKey = doneKey

// AckOutbox runs ack.lua as flush does, and AckHash is its SHA-1.
var (
	AckOutbox = ackOutbox
	AckHash   = ackScript.Hash()
)

// CommitHash is commit.lua's SHA-1.
var CommitHash = commitScript.Hash()

// DueHash is due.lua's SHA-1.
var DueHash = dueScript.Hash()

// Claim runs one claim of a due index shard (due.lua) as Scan does, returning the lcids.
func Claim(ctx context.Context, s *Scanner, shard int, now time.Time) ([]string, error) {
	_, _, lcids, err := s.claim(ctx, shard, now)
	return lcids, err
}
