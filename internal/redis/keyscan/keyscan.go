// Package keyscan walks the keys matching a pattern on a single Redis node or on every
// master of a Redis Cluster.
package keyscan

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Each calls fn with every key matching pattern (of keyType, when not empty). On a
// cluster client it scans every master; fn may then be called concurrently.
func Each(ctx context.Context, rc redis.UniversalClient, pattern, keyType string, fn func(key string) error) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var iter *redis.ScanIterator
		if keyType != "" {
			iter = c.ScanType(ctx, 0, pattern, 1000, keyType).Iterator()
		} else {
			iter = c.Scan(ctx, 0, pattern, 1000).Iterator()
		}
		for iter.Next(ctx) {
			if err := fn(iter.Val()); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := rc.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	}
	return scan(ctx, rc)
}

// Escape quotes the glob characters of s for a SCAN MATCH pattern.
func Escape(s string) string {
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
