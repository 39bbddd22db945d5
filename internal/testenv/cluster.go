package testenv

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
)

// RedisCluster starts a local 3-master Redis Cluster (scripts/redis-cluster.sh), waits
// until every node says cluster_state:ok and returns its seed address; t.Cleanup tears it
// down. It skips the test when redis-server is not installed and CI is not set
// (scripts/stack.sh up installs it), and fails it under CI.
func RedisCluster(t testing.TB) string {
	t.Helper()
	skipShort(t, "a Redis Cluster")
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("testenv: redis-server not installed (scripts/stack.sh up installs it)")
		}
		t.Skip("redis-server not installed (scripts/stack.sh up installs it)")
	}
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

func repoRoot(t testing.TB) string {
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
