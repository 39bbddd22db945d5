package domain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/junban/junban/internal/event"
)

// An order event's FIFO ids are its entity and its identity; two entities' events that
// share an event id get two deduplication ids; every nudge of one entity gets its own;
// a body that does not decode, or a larger one than the default limit, has none or
// still has its ids.
func TestOrderKeys(t *testing.T) {
	cases := map[string][2]string{
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-9"}`:                                                        {"LC-9", "{LC-9}e1"},
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-8"}`:                                                        {"LC-8", "{LC-8}e1"},
		`{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"SKU-1","lot_id":"L1","delta":-2,"reason":"breakage"}}`: {"sku:SKU-1", "{sku:SKU-1}e1"},
		`{"event_id":"drain_1","type":"junban.drain","lcid":"sku:SKU-3"}`:                                                   {"sku:SKU-3", "{sku:SKU-3}drain_1"},
	}
	for body, want := range cases {
		group, dedup, err := OrderKeys([]byte(body))
		if err != nil || group != want[0] || dedup != want[1] {
			t.Errorf("%s: %q %q %v, want %q", body, group, dedup, err, want)
		}
	}
	for _, body := range []string{`{`, `{"event_id":"e1","type":"payment.confirmed"}`, `{"type":"payment.confirmed","lcid":"LC-1"}`} {
		if g, d, err := OrderKeys([]byte(body)); err == nil {
			t.Errorf("%s: %q %q, want an error", body, g, d)
		}
	}
	big, err := json.Marshal(event.Order{EventID: "e2", Type: event.PaymentConfirmed, LCID: "LC-7", Data: json.RawMessage(`{"note":"` + strings.Repeat("x", MaxEventBytes) + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if g, d, err := OrderKeys(big); err != nil || g != "LC-7" || d != "{LC-7}e2" {
		t.Errorf("an event over MaxEventBytes: %q %q %v", g, d, err)
	}
}

// A result's FIFO ids are its entity and its identity (entity and event id).
func TestResultKeys(t *testing.T) {
	body, _ := json.Marshal(event.Result{EventID: "e1", Entity: "sku:SKU-1", Type: event.InventoryAdjusted, Outcome: "applied"})
	if g, d, err := ResultKeys(body); err != nil || g != "sku:SKU-1" || d != "{sku:SKU-1}e1" {
		t.Errorf("%s: %q %q %v", body, g, d, err)
	}
	for _, body := range []string{`{`, `{"event_id":"e1"}`, `{"entity":"LC-1"}`} {
		if g, d, err := ResultKeys([]byte(body)); err == nil {
			t.Errorf("%s: %q %q, want an error", body, g, d)
		}
	}
}
