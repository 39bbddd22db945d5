package ledger

import (
	"context"
	"strings"

	"github.com/junban/junban/internal/redis/keyscan"
)

// ScanQueues calls fn with every SKU under the ledger's prefix whose queue holds a
// waiting line (its sorted set <key>:q exists), on every master of a cluster. fn may be
// called concurrently for different masters of a cluster.
func (l *Ledger) ScanQueues(ctx context.Context, fn func(sku string) error) error {
	head := Key(l.prefix, "")
	head = head[:len(head)-1] // "<prefix>:inv:{"
	const tail = "}:q"
	return keyscan.Each(ctx, l.rc, keyscan.Escape(head)+"*"+tail, "zset", func(k string) error {
		return fn(strings.TrimSuffix(strings.TrimPrefix(k, head), tail))
	})
}
