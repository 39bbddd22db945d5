package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// The replication settings default to off and refuse what WAIT cannot take: a negative
// count, a timeout of 0 (WAIT 0 blocks for ever) or one past the client's read timeout,
// a replica check interval below a second.
func TestRedisReplicationSettings(t *testing.T) {
	t.Setenv("JUNBAN_STACK_ENV", filepath.Join(t.TempDir(), "none.env"))
	c, err := Load[RedisReplication]()
	if err != nil {
		t.Fatal(err)
	}
	if c.MinReplicas != 0 || c.WaitAOF || c.ReplicaTimeout.String() != "500ms" || c.ReplicaCheckInterval.String() != "30s" {
		t.Errorf("defaults %+v, want off with a 500ms timeout, replicas looked at every 30s", c)
	}
	for _, bad := range [][2]string{
		{"JUNBAN_REDIS_MIN_REPLICAS", "-1"},
		{"JUNBAN_REDIS_REPLICA_TIMEOUT", "0s"},
		{"JUNBAN_REDIS_REPLICA_TIMEOUT", "5s"},
		{"JUNBAN_REDIS_REPLICA_CHECK_INTERVAL", "0s"},
	} {
		t.Run(bad[0]+"="+bad[1], func(t *testing.T) {
			t.Setenv(bad[0], bad[1])
			_, err := Load[RedisReplication]()
			if err == nil || !strings.Contains(err.Error(), bad[0]) {
				t.Errorf("%s=%s: %v", bad[0], bad[1], err)
			}
		})
	}
}
