package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a redis-server process a test started; it is killed when the test ends.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
}

// Pause stops the process (SIGSTOP): it neither answers nor acknowledges replication
// until Resume; its connections stay open.
func (s *RedisServer) Pause(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume lets a paused process go on (SIGCONT).
func (s *RedisServer) Resume(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// needRedisServer skips the test when redis-server is not installed and CI is not set.
func needRedisServer(t testing.TB) {
	t.Helper()
	skipShort(t, "redis-server processes")
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("testenv: redis-server not installed (scripts/stack.sh up installs it)")
		}
		t.Skip("redis-server not installed (scripts/stack.sh up installs it)")
	}
}

// freePort returns a port that was free a moment ago, whose +10000 (a cluster bus) was too.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("testenv: no free port")
	return 0
}

// StartRedisServer runs redis-server on a free port with persistence off and the given
// extra arguments, and waits until it answers.
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	needRedisServer(t)
	port := freePort(t)
	dir := t.TempDir()
	argv := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}, args...)
	cmd := exec.Command("redis-server", argv...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: redis-server: %v", err)
	}
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	waitUntil(t, 10*time.Second, "redis-server at "+s.Addr, func() error { return c.Ping(context.Background()).Err() })
	return s
}

// RedisWithReplica starts a primary and one replica of it (replicaof), and waits until the
// replica's link is up.
func RedisWithReplica(t testing.TB) (primary, replica *RedisServer) {
	t.Helper()
	primary = StartRedisServer(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica = StartRedisServer(t, "--replicaof", host, port)
	c := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer c.Close()
	waitUntil(t, 20*time.Second, "replica link up", func() error {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica of %s not linked yet", primary.Addr)
		}
		return nil
	})
	return primary, replica
}

// ReplicatedCluster is a local Redis Cluster of three primaries with one replica each.
type ReplicatedCluster struct {
	Seed string
	// Replica maps a primary's address to its replica.
	Replica map[string]*RedisServer
}

// RedisClusterWithReplicas starts three primaries and three replicas in cluster mode
// (redis-cli --cluster create --cluster-replicas 1) and waits until every node says
// cluster_state:ok and every replica's link is up.
func RedisClusterWithReplicas(t testing.TB) *ReplicatedCluster {
	t.Helper()
	needRedisServer(t)
	var nodes []*RedisServer
	var addrs []string
	for range 6 {
		s := StartRedisServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	create := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("testenv: cluster create: %v\n%s", err, out)
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1]})
	defer rc.Close()
	ctx := context.Background()
	byAddr := map[string]*RedisServer{}
	for _, n := range nodes {
		byAddr[n.Addr] = n
	}
	rcl := &ReplicatedCluster{Seed: addrs[0], Replica: map[string]*RedisServer{}}
	waitUntil(t, 30*time.Second, "cluster with replicas", func() error {
		for _, n := range nodes {
			c := redis.NewClient(&redis.Options{Addr: n.Addr})
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = fmt.Errorf("%s: cluster_state not ok", n.Addr)
			}
			var repl string
			if err == nil {
				repl, err = c.Info(ctx, "replication").Result()
			}
			c.Close()
			if err != nil {
				return err
			}
			if strings.Contains(repl, "role:slave") {
				if !strings.Contains(repl, "master_link_status:up") {
					return fmt.Errorf("%s: replica not linked", n.Addr)
				}
				host, port := infoValue(repl, "master_host"), infoValue(repl, "master_port")
				rcl.Replica[host+":"+port] = n
			}
		}
		if len(rcl.Replica) != 3 {
			return fmt.Errorf("%d of 3 primaries have a replica", len(rcl.Replica))
		}
		return nil
	})
	return rcl
}

func infoValue(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func waitUntil(t testing.TB, guard time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: waited %v for %s: %v", guard, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the process (SIGKILL) and waits for it: its connections close, and a primary
// forgets it as its replica.
func (s *RedisServer) Stop(t testing.TB) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGCONT)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.cmd.Wait()
}

// RedisWithReplicas starts a primary and n replicas of it (replicaof), and waits until
// the primary reports every replica online.
func RedisWithReplicas(t testing.TB, n int) (primary *RedisServer, replicas []*RedisServer) {
	t.Helper()
	primary = StartRedisServer(t)
	host, port, _ := strings.Cut(primary.Addr, ":")
	for range n {
		replicas = append(replicas, StartRedisServer(t, "--replicaof", host, port))
	}
	c := redis.NewClient(&redis.Options{Addr: primary.Addr})
	defer c.Close()
	waitUntil(t, 20*time.Second, "replicas online", func() error {
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if online := strings.Count(info, "state=online"); online != n {
			return fmt.Errorf("%d of %d replicas of %s online", online, n, primary.Addr)
		}
		return nil
	})
	return primary, replicas
}
