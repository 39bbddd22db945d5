package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is chaos's own redis-server: AOF on with appendfsync always, so a SIGKILL
// loses no write that a client saw acknowledged, and a restart on the same port and
// directory brings every key back.
type redisServer struct {
	p    *proc
	port int
	dir  string
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("chaos: redis-server not found: %w (apt-get install redis-server)", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	r := &redisServer{port: port, dir: data}
	r.p = &proc{
		name: "redis-server",
		path: bin,
		args: []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", data,
			"--appendonly", "yes", "--appendfsync", "always", "--save", "",
			"--protected-mode", "no", "--daemonize", "no",
		},
		env: os.Environ(),
		log: logPath(dir, "redis-server"),
	}
	if err := r.p.start(); err != nil {
		return nil, err
	}
	if err := r.waitReady(ctx, 20*time.Second); err != nil {
		r.p.close(time.Second)
		return nil, err
	}
	return r, nil
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) waitReady(ctx context.Context, timeout time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr(r.port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: redis on port %d not ready: %w; log:\n%s", r.port, err, tail(r.p.log, 2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// restart SIGKILLs redis-server, waits pause and starts it again on the same port and
// directory; it returns once Redis answers again (having replayed its AOF).
func (r *redisServer) restart(ctx context.Context, pause time.Duration) error {
	r.p.kill()
	select {
	case <-ctx.Done():
	case <-time.After(pause):
	}
	if err := r.p.start(); err != nil {
		return err
	}
	return r.waitReady(ctx, 60*time.Second)
}

func (r *redisServer) close() { r.p.close(5 * time.Second) }
