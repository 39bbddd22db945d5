package order

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/event"
)

// Store reads the orders in Redis, for reconcile and tests; it writes nothing.
type Store struct {
	rc     redis.UniversalClient
	prefix string
}

// NewStore returns a Store over the keys of prefix.
func NewStore(rc redis.UniversalClient, prefix string) *Store { return &Store{rc: rc, prefix: prefix} }

// Order returns an order's state and its entity seq (the seq of its newest result); a
// nil snapshot when the entity holds no order.
func (s *Store) Order(ctx context.Context, lcid string) (*event.OrderSnapshot, int64, error) {
	st, err := LoadState(ctx, s.rc, s.prefix, lcid)
	return st.Order, st.Seq, err
}

// ScanOrders calls fn with every lcid that has a state in Redis (on every master of a
// cluster); SKU entities hold no order and are skipped.
func (s *Store) ScanOrders(ctx context.Context, fn func(lcid string) error) error {
	head, tail, _ := strings.Cut(StateKey(s.prefix, "\x00"), "\x00")
	pattern := globEscape(head) + "*" + globEscape(tail)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			entity := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), head), tail)
			if strings.HasPrefix(entity, "sku:") {
				continue
			}
			if err := fn(entity); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := s.rc.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, s.rc)
}

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
