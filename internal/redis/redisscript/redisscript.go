// Package redisscript runs Lua scripts by EVALSHA inside pipelines, where go-redis's
// Script.Run (EVALSHA, then EVAL when the server answers NOSCRIPT) is not available: a
// pipeline's commands are sent before any reply is read. Every junban script that runs
// in a pipeline goes through it, so the NOSCRIPT fallback is written once.
package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// NoScript reports whether c failed because the server did not know the script: the
// script did not run, and running it again by EVAL (which loads it) is safe.
func NoScript(c redis.Cmder) bool {
	return c != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT")
}

// Call is one call of a script.
type Call struct {
	Keys []string
	Args []any
}

// Pipelined runs every call of s by EVALSHA in one pipeline, and those the server
// answered NOSCRIPT again by EVAL in a second one. It returns one command per call, in
// order; each carries its own reply or error (a pipeline error is every command's).
func Pipelined(ctx context.Context, rc redis.UniversalClient, s *redis.Script, calls []Call) []*redis.Cmd {
	return pipelined(ctx, rc, calls, func(p redis.Pipeliner, c Call) *redis.Cmd {
		return s.EvalSha(ctx, p, c.Keys, c.Args...)
	}, func(p redis.Pipeliner, c Call) *redis.Cmd {
		return s.Eval(ctx, p, c.Keys, c.Args...)
	})
}

// PipelinedRO is Pipelined with EVALSHA_RO and EVAL_RO, for a script that opens with the
// no-writes flag (it may then run on a replica).
func PipelinedRO(ctx context.Context, rc redis.UniversalClient, s *redis.Script, calls []Call) []*redis.Cmd {
	return pipelined(ctx, rc, calls, func(p redis.Pipeliner, c Call) *redis.Cmd {
		return s.EvalShaRO(ctx, p, c.Keys, c.Args...)
	}, func(p redis.Pipeliner, c Call) *redis.Cmd {
		return s.EvalRO(ctx, p, c.Keys, c.Args...)
	})
}

func pipelined(ctx context.Context, rc redis.UniversalClient, calls []Call, bySHA, byBody func(redis.Pipeliner, Call) *redis.Cmd) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds
	}
	pipe := rc.Pipeline()
	for i, c := range calls {
		cmds[i] = bySHA(pipe, c)
	}
	_, _ = pipe.Exec(ctx) // each command carries its error
	var again []int
	for i, c := range cmds {
		if NoScript(c) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	pipe = rc.Pipeline()
	for _, i := range again {
		cmds[i] = byBody(pipe, calls[i])
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}
