package chaos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/testenv"
)

// A cut ends a call in flight, and counts it as cut in the middle of a call: a BLPOP through the proxy that Redis holds (it would wait
// a minute for its list) fails at once with the connection's error, neither a value nor
// redis.Nil, and the client's next call goes through the proxy again on a new
// connection. Broken variant tried: cut that counts the connections without resetting
// them; the BLPOP then waits out its minute and the test fails on its deadline.
func TestProxyCutEndsACallInFlight(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	c, ok := rc.(*redis.Client)
	if !ok {
		t.Skip("the proxy test needs a single Redis, not a cluster")
	}
	opt := c.Options()
	ps, err := startProxies([]string{opt.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.close()
	via := redis.NewClient(&redis.Options{Addr: ps.of(opt.Addr), DB: opt.DB, Username: opt.Username, Password: opt.Password, MaxRetries: -1, ReadTimeout: -1})
	defer via.Close()
	key := prefix + ":proxy-test"
	done := make(chan error, 1)
	go func() { done <- via.BLPop(context.Background(), time.Minute, key).Err() }()
	testenv.WaitFor(t, 30*time.Second, "the BLPOP blocked in Redis", func() bool {
		list, err := rc.ClientList(context.Background()).Result()
		return err == nil && strings.Contains(list, "cmd=blpop")
	})
	if n, mid := ps.cut(); n != 1 || mid != 1 {
		t.Errorf("cut %d connections, %d in the middle of a call; want 1, 1", n, mid)
	}
	select {
	case err := <-done:
		if err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("BLPOP after the cut: %v, want the connection's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the BLPOP still waits 30 s after the cut")
	}
	if err := via.Set(context.Background(), key, "v", time.Minute).Err(); err != nil {
		t.Fatalf("a call after the cut: %v", err)
	}
	if got := rc.Get(context.Background(), key).Val(); got != "v" {
		t.Fatalf("the call after the cut wrote %q, want v", got)
	}
}
