package redisscript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/redis/redisscript"
	"github.com/junban/junban/internal/testenv"
)

// A script the server does not know yet runs once per call, by EVAL after EVALSHA's
// NOSCRIPT, with each call's own reply.
func TestPipelinedLoadsAnUnknownScript(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	ctx := context.Background()
	// The test's own prefix in the body makes a script no server has seen.
	s := redis.NewScript("-- " + prefix + "\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])")
	k := prefix + ":n"
	calls := []redisscript.Call{{Keys: []string{k}, Args: []any{1}}, {Keys: []string{k}, Args: []any{10}}}
	cmds := redisscript.Pipelined(ctx, rc, s, calls)
	if a, b := cmds[0].Val(), cmds[1].Val(); a != int64(1) || b != int64(11) {
		t.Fatalf("replies %v %v (errors %v %v)", a, b, cmds[0].Err(), cmds[1].Err())
	}
	// Known now: EVALSHA answers, nothing runs twice.
	cmds = redisscript.Pipelined(ctx, rc, s, calls[:1])
	if v, _ := rc.Get(ctx, k).Int(); v != 12 || cmds[0].Val() != int64(12) {
		t.Fatalf("counter %d, reply %v", v, cmds[0].Val())
	}
	ro := redis.NewScript("#!lua flags=no-writes\n-- " + prefix + "\nreturn redis.call('GET', KEYS[1])")
	cmds = redisscript.PipelinedRO(ctx, rc, ro, calls[:1])
	if cmds[0].Val() != "12" {
		t.Fatalf("read-only reply %v (%v)", cmds[0].Val(), cmds[0].Err())
	}
	if redisscript.NoScript(cmds[0]) {
		t.Fatal("NoScript of a reply")
	}
}
