package lockhandoff

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// BacklogEntry is an entity of the backlog index: one that may hold a backlog, with the
// time its entry was last refreshed (an envelope joined its wait list or proc).
type BacklogEntry struct {
	Entity    string
	Refreshed time.Time
}

// BacklogIndex returns every entity of the backlog index of prefix (shards: the
// Config.IndexShards its workers use), in no particular order. An entity may have no
// backlog any more (the sweeper forgets idle ones after Config.IndexGrace); Inspect
// tells. It writes nothing.
func BacklogIndex(ctx context.Context, rc redis.UniversalClient, prefix string, shards int) ([]BacklogEntry, error) {
	if shards <= 0 {
		shards = IndexShardsDefault
	}
	var out []BacklogEntry
	for shard := range shards {
		key := indexKey(prefix, shard)
		zs, err := rc.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("lockhandoff: backlog index %s: %w", key, err)
		}
		for _, z := range zs {
			e, _ := z.Member.(string)
			out = append(out, BacklogEntry{Entity: e, Refreshed: time.UnixMilli(int64(z.Score)).UTC()})
		}
	}
	return out, nil
}
