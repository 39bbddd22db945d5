package console

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// insertOutboxRow writes an outbox row created ageSec seconds ago, published or not.
func (d *deps) insertOutboxRow(t *testing.T, lcid string, ageSec int, published bool) {
	t.Helper()
	id := uuid.NewString()
	body, _ := json.Marshal(map[string]any{"id": id, "kind": "order.refused", "entity": lcid, "lcid": lcid, "seq": 1,
		"occurred_at": "2026-12-01T10:00:00Z", "caused_by": map[string]string{"event_id": "evt-1", "type": "order.placed"},
		"data": map[string]string{"reason": "ERR_SHORTAGE"}})
	err := d.db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body, created_at, published_at)
VALUES (?, 'order.refused', ?, 1, ?, now() - make_interval(secs => ?), CASE WHEN ? THEN now() END)`,
		id, lcid, string(body), ageSec, published).Error
	if err != nil {
		t.Fatal(err)
	}
}

// The overview shows the relay's state: the unpublished outbox rows and the oldest one's
// age, in its JSON and its page; published rows do not count, and an empty outbox shows
// 0. (Failed against an overview that read no outbox: depth 0 with a row waiting.)
func TestOverviewShowsTheOutbox(t *testing.T) {
	d := newDeps(t)
	tc := d.console(t, []string{readToken}, []string{adminToken}, nil)
	ck := tc.signIn(readToken)
	sample := func() Sample {
		t.Helper()
		tc.clock.add(SampleEveryDefault) // a new reading, not the last one
		w := tc.do(req{method: "GET", path: "/overview.json", cookie: ck})
		var o overviewData
		if err := json.Unmarshal(w.Body.Bytes(), &o); w.Code != 200 || err != nil {
			t.Fatalf("GET /overview.json: %d %v %s", w.Code, err, w.Body)
		}
		if !strings.Contains(w.Body.String(), `"outbox_depth":`) || !strings.Contains(w.Body.String(), `"outbox_lag_sec":`) {
			t.Fatalf("GET /overview.json without the outbox: %s", w.Body)
		}
		return o.Last
	}
	if s := sample(); s.OutboxDepth != 0 || s.OutboxLagSec != 0 {
		t.Fatalf("empty outbox: depth %d, lag %v", s.OutboxDepth, s.OutboxLagSec)
	}
	d.insertOutboxRow(t, "LC-1", 0, true)
	d.insertOutboxRow(t, "LC-2", 90, false)
	d.insertOutboxRow(t, "LC-3", 5, false)
	s := sample()
	if s.OutboxDepth != 2 || s.OutboxLagSec < 90 {
		t.Fatalf("two rows waiting, the oldest for 90 s: depth %d, lag %v", s.OutboxDepth, s.OutboxLagSec)
	}
	tc.clock.add(SampleEveryDefault)
	w := tc.do(req{method: "GET", path: "/", cookie: ck})
	if page := w.Body.String(); w.Code != 200 || !strings.Contains(page, `id="outbox-depth">2<`) || !strings.Contains(page, `id="outbox-lag">9`) {
		t.Fatalf("GET /: %d, no outbox depth 2 and lag 9x s:\n%s", w.Code, page)
	}
}
