package lockhandoff

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// TestCluster runs the core suite against a local 3-master Redis Cluster started by
// scripts/redis-cluster.sh: every script touches one entity's hash tag, the index shards
// live in other slots and are written in the same pipeline.
func TestCluster(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (scripts/stack.sh up installs it)")
	}
	seed := startCluster(t)
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
	t.Run("CommitRunsWithTheStep", func(t *testing.T) { t.Parallel(); testCommitRunsWithTheStep(t, cluster) })
	t.Run("CommitFailedWrite", func(t *testing.T) { t.Parallel(); testCommitFailedWrite(t, cluster) })
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

// startCluster starts the cluster and returns its seed address; t.Cleanup tears it down.
func startCluster(t *testing.T) string {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "redis-cluster.sh")
	dir := t.TempDir()
	out, err := exec.Command(script, "up", dir).Output()
	t.Cleanup(func() {
		if err := exec.Command(script, "down", dir).Run(); err != nil {
			t.Logf("cluster teardown: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("%s up: %v\n%s", script, err, out)
	}
	var seed string
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "SEED="); ok {
			seed = v
		}
	}
	if seed == "" {
		t.Fatalf("%s up printed no seed:\n%s", script, out)
	}
	// Wait until every node agrees the cluster is ok (the script checks the seed only).
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}})
	defer rc.Close()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// ForEachShard runs the callbacks concurrently: each answers for its node alone.
		err := rc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return errors.New(c.Options().Addr + ": cluster_state not ok")
			}
			return nil
		})
		if err == nil {
			return seed
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster at %s not ok: %v", seed, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}
