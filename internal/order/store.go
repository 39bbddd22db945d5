package order

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/redis/keyscan"
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
	pattern := keyscan.Escape(head) + "*" + keyscan.Escape(tail)
	return keyscan.Each(ctx, s.rc, pattern, "", func(key string) error {
		entity, ok := stateKeyEntity(key, head, tail)
		if !ok || strings.HasPrefix(entity, event.SKUEntityPrefix) {
			return nil
		}
		return fn(entity)
	})
}

// stateKeyEntity returns the entity of a key that matched "<head>*<tail>", and false
// when the key is no state key. The pattern also matches other keys of an entity whose
// suffix ends in the tail, such as the done key of an event id ending in "}:state"
// ("<prefix>:{LC-1}:done:e}:state"). No entity holds a brace (it would break the hash
// tag of its keys, and decode refuses one in an lcid), so an entity with one is part of
// another key.
func stateKeyEntity(key, head, tail string) (string, bool) {
	entity, ok := strings.CutPrefix(key, head)
	if !ok {
		return "", false
	}
	if entity, ok = strings.CutSuffix(entity, tail); !ok || entity == "" || strings.ContainsAny(entity, "{}") {
		return "", false
	}
	return entity, true
}
