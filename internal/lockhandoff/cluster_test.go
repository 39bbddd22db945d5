package lockhandoff

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// TestCluster runs the core suite against a local 3-master Redis Cluster started by
// scripts/redis-cluster.sh: every script touches one entity's hash tag, the index shards
// live in other slots and are written in the same pipeline.
func TestCluster(t *testing.T) {
	t.Parallel()
	seed := testenv.RedisCluster(t)
	cluster := backend{
		name: "cluster",
		client: func(t *testing.T) (redis.UniversalClient, string) {
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}})
			t.Cleanup(func() { rc.Close() })
			return rc, testenv.Name(t)
		},
		env: func(t *testing.T) []string { return []string{helperClusterSeed + "=" + seed} },
	}
	t.Run("OneKey", func(t *testing.T) { t.Parallel(); testOneKey(t, cluster, 8, 50, 0) })
	t.Run("OneKeyDetached", func(t *testing.T) { t.Parallel(); testOneKey(t, cluster, 8, 50, 4) })
	t.Run("CrashRecovery", func(t *testing.T) { t.Parallel(); testCrashRecovery(t, cluster) })
	t.Run("Full", func(t *testing.T) { t.Parallel(); testFull(t, cluster) })
	t.Run("WrongToken", func(t *testing.T) { t.Parallel(); testWrongToken(t, cluster) })
	t.Run("TrimRunsWithTheStep", func(t *testing.T) { t.Parallel(); testTrimRunsWithTheStep(t, cluster) })
	t.Run("TrimFailedLeavesTheEnvelope", func(t *testing.T) { t.Parallel(); testTrimFailed(t, cluster) })
	t.Run("HandoffSentAgain", func(t *testing.T) { t.Parallel(); testHandoffSentAgain(t, cluster) })
	t.Run("IndexShardsSpreadOverNodes", func(t *testing.T) {
		t.Parallel()
		rc, prefix := cluster.client(t)
		hd, _ := newTestHandoff(t, rc, prefix, Config{}, func(context.Context, Turn, []byte) error { return nil })
		slots := map[int64]bool{}
		for i := range hd.cfg.IndexShards {
			n, err := rc.ClusterKeySlot(context.Background(), indexKey(prefix, i)).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots[n] = true
		}
		if len(slots) < 2 {
			t.Errorf("index shards all in one slot")
		}
	})
}
