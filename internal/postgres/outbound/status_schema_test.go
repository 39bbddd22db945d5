package outbound

import (
	"encoding/json"
	"testing"

	"github.com/junban/junban/internal/event"
)

// Every order status an order can have is one the schemas of the messages that carry it
// accept: an order.refused for an expired order says "expired" (the order.refused
// schema once lacked it, and the chaos run's outbound check found such a message
// invalid).
func TestSchemasTakeEveryOrderStatus(t *testing.T) {
	ex := exampleMessages(t)
	for _, st := range event.Statuses {
		for kind, data := range map[Kind]any{
			OrderRefused:       OrderRefusedData{Reason: "ERR_INVALID_TRANSITION", Status: st},
			OrderStatusChanged: OrderStatusData{From: ptr(event.StatusPlaced), To: st, Mode: event.ModeShip, TargetDate: "2026-12-03", Lines: []event.SnapshotLine{}, Changed: []string{"status"}},
		} {
			var m map[string]any
			if err := json.Unmarshal(ex[kind], &m); err != nil {
				t.Fatal(err)
			}
			m["data"] = data
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(b); err != nil {
				t.Errorf("%s with status %q: %v", kind, st, err)
			}
		}
	}
}
