package lockhandoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPrefetch(t *testing.T) {
	t.Parallel()
	testPrefetch(t, single)
}

// describe is what a handler found in Turn.Prefetched, as one line.
func describe(p *Prefetched) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("id=%q byID=%v values=%v", p.ID, p.ByID, p.Values)
}

// prefetchRecorder is a handler that records what each call found prefetched, and
// writes what a step would commit: the entity's state and the event's done marker.
type prefetchRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *prefetchRecorder) record(tr Turn) {
	r.mu.Lock()
	r.got = append(r.got, describe(tr.Prefetched))
	r.mu.Unlock()
}

func (r *prefetchRecorder) lines() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.got, "\n")
}

// The script that gives an envelope its turn reads what Config.Prefetch names for that
// envelope: after the previous step's writes (a handed-off envelope sees what the one
// before it committed), with the step's trims before it in the handoff's keys, and on a
// resume too. The id is found by its field's name; a value with an escape is not read.
func testPrefetch(t *testing.T, b backend) {
	rc, prefix := b.client(t)
	ctx := context.Background()
	const entity = "LC-prefetch"
	state, log := Key(prefix, entity, "state"), Key(prefix, entity, "log")
	fillList(t, rc, log, 10)
	rec := &prefetchRecorder{}
	var hd *Handoff
	queued := false
	hd, _ = newTestHandoff(t, rc, prefix, Config{
		HandlerRetries: -1,
		Prefetch:       &Prefetch{Suffixes: []string{"state", "missing"}, IDField: "id", IDSuffix: "done:"},
	}, func(hctx context.Context, tr Turn, env []byte) error {
		rec.record(tr)
		var ev struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(env, &ev); err != nil {
			return err
		}
		if !queued {
			queued = true
			// Behind the first envelope, while it holds the turn: another event (its
			// id after a nested object), the first one's duplicate, and one whose id
			// holds an escape.
			for _, e := range []string{`{"data":{"n":1},"id":"b"}`, `{"id": "a", "n": 2}`, `{"id":"c\"d"}`} {
				if out, err := hd.Submit(ctx, entity, []byte(e)); err != nil || out != OutcomeQueued {
					t.Errorf("%s: %v %v", e, out, err)
				}
			}
		}
		if err := rc.Set(hctx, state, "after "+ev.ID, 0).Err(); err != nil {
			return err
		}
		if err := rc.Set(hctx, Key(prefix, entity, "done:"+ev.ID), "result of "+ev.ID, 0).Err(); err != nil {
			return err
		}
		// The handoff's reads come after its trims' keys.
		return tr.TrimWithStep(log, 1, nil)
	})
	if _, err := hd.Submit(ctx, entity, []byte(`{"id":"a"}`)); err != nil {
		t.Fatal(err)
	}
	// A backlog without a holder (a holder that died) is resumed, with its reads.
	entry := strconv.FormatInt(time.Now().UnixMilli(), 10) + `:{"id":"e"}`
	if err := rc.RPush(ctx, Key(prefix, entity, "wait"), entry).Err(); err != nil {
		t.Fatal(err)
	}
	if err := hd.Resume(ctx, entity); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		`id="a" byID=<nil> values=[<nil> <nil>]`,
		`id="b" byID=<nil> values=[after a <nil>]`,
		`id="a" byID=result of a values=[after b <nil>]`,
		`id="" byID=<nil> values=[after a <nil>]`,
		`id="e" byID=<nil> values=[after c"d <nil>]`,
	}, "\n")
	if got := rec.lines(); got != want {
		t.Errorf("prefetched:\n%s\nwant:\n%s", got, want)
	}
	if n, _ := rc.LLen(ctx, log).Result(); n != 5 {
		t.Errorf("log holds %d entries after five steps' trims, want 5", n)
	}
}

// A handler's retry finds nothing prefetched: its failed run may have written since.
func TestPrefetchNotOnRetry(t *testing.T) {
	t.Parallel()
	rc, prefix := single.client(t)
	rec := &prefetchRecorder{}
	calls := 0
	hd, _ := newTestHandoff(t, rc, prefix, Config{
		HandlerRetries: 1,
		Prefetch:       &Prefetch{Suffixes: []string{"state"}},
	}, func(_ context.Context, tr Turn, _ []byte) error {
		rec.record(tr)
		if calls++; calls == 1 {
			return errors.New("first run fails")
		}
		return nil
	})
	if _, err := hd.Submit(context.Background(), "LC-retry", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.lines(), "id=\"\" byID=<nil> values=[<nil>]\nnone"; got != want {
		t.Errorf("prefetched:\n%s\nwant:\n%s", got, want)
	}
}

func TestPrefetchConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    Prefetch
		want string
	}{
		{Prefetch{IDField: "event-id", IDSuffix: "done:"}, "not letters, digits and underscores"},
		{Prefetch{IDField: "a%s", IDSuffix: "done:"}, "not letters, digits and underscores"},
		{Prefetch{IDSuffix: "done:"}, "without an IDField"},
		{Prefetch{Suffixes: []string{""}}, "empty or holds a brace"},
		{Prefetch{Suffixes: []string{"x}"}}, "empty or holds a brace"},
	} {
		err := Config{Redis: nil, Prefetch: &c.p}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}
