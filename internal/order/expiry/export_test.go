package expiry

import (
	"context"
	"time"
)

// DueHash is due.lua's SHA-1.
var DueHash = dueScript.Hash()

// Claim runs one claim of a due index shard (due.lua) as Scan does, returning the lcids.
func Claim(ctx context.Context, s *Scanner, shard int, now time.Time) ([]string, error) {
	_, _, lcids, err := s.claim(ctx, shard, now)
	return lcids, err
}
