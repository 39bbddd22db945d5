package lockhandoff

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// Turns of several entities share pipelines (a take with its backlog index entry, the
// handoffs with their trims). Each run here cuts one such pipeline after its first
// command, once the server ran it; go-redis sends the whole pipeline again. Every
// envelope's handler runs once, every step's trim is applied once, and each entity ends
// with nothing in wait or proc once a later Submit (e2) ran: a handoff run twice answers
// STALE and leaves the next envelope in proc for the next turn (TestHandoffTwiceTrimsOnce).
//
// Broken variants tried: take.lua without the push marker's check (the take case): an
// envelope's handler ran twice; handoff.lua running its trims before the seq check (the
// handoff case): a step's trim was applied twice.
func TestCutSharedPipelinesLoseNothingAndApplyOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		script string
	}{{"take", takeScript.Hash()}, {"handoff", handoffScript.Hash()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			direct, prefix := testenv.Redis(t)
			isScript := testenv.ScriptCall(c.script)
			cut := testenv.StartPipelineCutter(t, testenv.RedisAddr(t), 1, func([]string) bool { return false })
			rc := testenv.RedisVia(t, cut.Addr())
			const entities = 4
			var (
				mu   sync.Mutex
				seen = map[string][]string{}
				hd   *Handoff
			)
			hd, _ = newTestHandoff(t, rc, prefix, trimming(Config{HandlerRetries: -1}, nil, func(_ context.Context, tr Turn, env []byte) (Result, error) {
				mu.Lock()
				seen[tr.Entity] = append(seen[tr.Entity], string(env))
				mu.Unlock()
				if string(env) == "e0" {
					if _, err := hd.Submit(context.Background(), tr.Entity, []byte("e1")); err != nil {
						t.Errorf("%s e1: %v", tr.Entity, err)
					}
				}
				return trimOf(t, tr, Key(prefix, tr.Entity, "mark"), 1), nil
			}), nil)
			for i := range entities {
				fillList(t, direct, Key(prefix, fmt.Sprint("LC-cut-", i), "mark"), 5)
			}
			// A first turn loads the scripts: a cut of an EVALSHA answered NOSCRIPT would
			// cut a script that never ran.
			fillList(t, direct, Key(prefix, "LC-warm", "mark"), 5)
			if _, err := hd.Submit(context.Background(), "LC-warm", []byte("e0")); err != nil {
				t.Fatal(err)
			}
			cut.Arm(1, func(args []string) bool {
				// A queued take (e1), or the script after a handler ran: the cut part is
				// then one that has an effect to repeat.
				return isScript(args) && (c.name != "take" || slices.Contains(args, "e1"))
			})
			var wg sync.WaitGroup
			for i := range entities {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := hd.Submit(context.Background(), fmt.Sprint("LC-cut-", i), []byte("e0")); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if cut.Cuts() != 1 {
				t.Fatalf("the proxy cut %d pipelines, want 1", cut.Cuts())
			}
			if c.name == "take" && cut.Lost() == 0 {
				t.Fatal("the cut pipeline lost no command: its take's index entry should have been")
			}
			ctx := context.Background()
			for i := range entities {
				entity := fmt.Sprint("LC-cut-", i)
				testenv.WaitFor(t, 30*time.Second, "the turn of "+entity+" to end", func() bool {
					n, _ := direct.Exists(ctx, Key(prefix, entity, "lock")).Result()
					return n == 0
				})
				if _, err := hd.Submit(ctx, entity, []byte("e2")); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				got := slices.Clone(seen[entity])
				mu.Unlock()
				if !slices.Equal(got, []string{"e0", "e1", "e2"}) {
					t.Errorf("%s: handlers ran %q, want [e0 e1 e2]", entity, got)
				}
				if left, _ := direct.LRange(ctx, Key(prefix, entity, "mark"), 0, -1).Result(); !slices.Equal(left, []string{"3", "4"}) {
					t.Errorf("%s: after three steps of one trim each the list is %q, want [3 4]", entity, left)
				}
				for _, k := range []string{"wait", "proc"} {
					if n, _ := direct.LLen(ctx, Key(prefix, entity, k)).Result(); n != 0 {
						t.Errorf("%s: %s holds %d entries", entity, k, n)
					}
				}
			}
		})
	}
}
