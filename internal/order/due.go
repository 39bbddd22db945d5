package order

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/tracing"
	"github.com/junban/junban/internal/redis/replication"
)

// The due index: the orders whose reservation expires, spread over DueShards sorted sets
// (each its own hash tag, so its own Redis Cluster slot), member the lcid, score its
// hold_until in unix microseconds. The order's handler writes an entry before the commit
// of a step that gives the order a new hold, and removes it after the commit of one that
// clears it (while its score is still that hold); expiry.Scanner claims due entries
// (internal/order/expiry, due.lua) and submits their expiry into the order's turn
// (docs/architecture.md, "Reservations that expire").

// DueShards is the number of sorted sets the due index is spread over.
const DueShards = 16

var (
	//go:embed undue.lua
	undueLua    string
	undueScript = redis.NewScript(undueLua)
)

// DueKey is the key of one shard of the due index. Its hash tag is no order's: an lcid
// that were "junban-due:<n>" would share the slot, never a key (no entity's key ends in
// ":due").
func DueKey(prefix string, shard int) string {
	return lockhandoff.Key(prefix, "junban-due:"+strconv.Itoa(shard), "due")
}

// DueShard is the shard of lcid's entry: FNV-1a of the lcid, modulo DueShards.
func DueShard(lcid string) int {
	f := fnv.New32a()
	_, _ = f.Write([]byte(lcid)) // never fails
	return int(f.Sum32() % DueShards)
}

// DueScore is a hold's score: unix microseconds (the hold's own precision).
func DueScore(t time.Time) int64 { return t.UnixMicro() }

// IndexHold writes lcid's entry at hold: the handler's write before a commit, and a
// re-index of restored orders (junbanctl holds reindex). A stale entry is harmless.
func IndexHold(ctx context.Context, rc redis.UniversalClient, prefix, lcid string, hold time.Time) error {
	return indexHold(ctx, rc, rc, nil, prefix, lcid, hold)
}

// indexHold is IndexHold followed, when w is on, by a WAIT on the due shard's primary
// (another primary than the order's on a cluster, so the commit's WAIT does not cover
// it): a commit that relies on the entry must not outlive it in a failover. Without the
// WAIT, the entry goes alone through shared.
func indexHold(ctx context.Context, rc redis.UniversalClient, shared Commands, w *replication.Waiter, prefix, lcid string, hold time.Time) error {
	key := DueKey(prefix, DueShard(lcid))
	z := redis.Z{Score: float64(DueScore(hold)), Member: lcid}
	var err error
	if w.On() {
		var c *redis.IntCmd
		err = w.Pipelined(ctx, rc, key, "due", func(pp redis.Pipeliner) { c = pp.ZAdd(ctx, key, z) })
		if c != nil && c.Err() != nil {
			err = c.Err()
		}
	} else {
		err = shared.ZAdd(ctx, key, z).Err()
	}
	if err != nil {
		return fmt.Errorf("order: index the hold of %s: %w", lcid, err)
	}
	return nil
}

// MoveDue sets lcid's entry to next (nil: removes it) if its score is still was; it says
// whether it did.
func MoveDue(ctx context.Context, rc Commands, prefix, lcid string, was int64, next *int64) (bool, error) {
	to := ""
	if next != nil {
		to = strconv.FormatInt(*next, 10)
	}
	n, err := undueScript.Run(ctx, rc, []string{DueKey(prefix, DueShard(lcid))}, lcid, was, to).Int()
	if err != nil {
		return false, fmt.Errorf("order: due entry of %s: %w", lcid, err)
	}
	return n == 1, nil
}

// HoldOf is an order's hold (nil: none).
func HoldOf(o *event.OrderSnapshot) *time.Time {
	if o == nil {
		return nil
	}
	return o.HoldUntil
}

func sameHold(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

// indexBefore writes the due entry of a step that leaves the order a new hold, before its
// commit (restored: the state came from PostgreSQL, whose hold may lack its entry).
func (p *Processor) indexBefore(ctx context.Context, lcid string, was, next domain.State, restored bool) error {
	h := HoldOf(next.Order)
	if h == nil || (sameHold(HoldOf(was.Order), h) && !restored) {
		return nil
	}
	return indexHold(ctx, p.rc, p.shared, p.cfg.Replication, p.cfg.Prefix, lcid, *h)
}

// unindexAfter removes the due entry of a hold the committed step cleared, while its score
// is still that hold; a scanner's claim, or a failure here, leaves it to the scanner,
// which drops an entry whose order holds no hold.
func (p *Processor) unindexAfter(ctx context.Context, lcid string, was, next domain.State) {
	h := HoldOf(was.Order)
	if h == nil || HoldOf(next.Order) != nil {
		return
	}
	if _, err := MoveDue(ctx, p.shared, p.cfg.Prefix, lcid, DueScore(*h), nil); err != nil {
		p.log.With(tracing.LogFields(ctx)...).Warn("due entry left to the scanner", zap.String("lcid", lcid), zap.Error(err))
	}
}
