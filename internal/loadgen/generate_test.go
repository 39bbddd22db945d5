package loadgen

import (
	"encoding/json"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/order"
)

func TestGenerateIsReproducibleAndShapedAsAsked(t *testing.T) {
	spec := DefaultSpec("T")
	spec.Orders = 500
	a, b := Generate(spec), Generate(spec)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("the same spec generated two different workloads")
	}
	seen := map[string]int{}
	pos := map[string]int{}
	for i, e := range a.Events {
		body, _ := json.Marshal(e)
		if _, err := order.Decode(body, 0); err != nil {
			t.Fatalf("generated an invalid event: %v\n%s", err, body)
		}
		if seen[e.EventID] == 0 {
			pos[e.EventID] = i
		}
		seen[e.EventID]++
	}
	if len(seen) != a.Distinct || len(a.Orders) != spec.Orders {
		t.Fatalf("distinct %d, counted %d; orders %d", a.Distinct, len(seen), len(a.Orders))
	}
	dups := float64(len(a.Events)-a.Distinct) / float64(a.Distinct)
	if dups < spec.DuplicateShare/2 || dups > spec.DuplicateShare*2 {
		t.Errorf("duplicate share %.2f, asked %.2f", dups, spec.DuplicateShare)
	}
	if len(a.EarlyPayments) == 0 {
		t.Fatal("no payment arrives before its placement")
	}
	for _, id := range a.EarlyPayments {
		lcid := id[:len(id)-4] // "<lcid>-e03"
		if pos[id] > pos[lcid+"-e01"] {
			t.Errorf("%s is not sent before its placement", id)
		}
	}
	types := map[event.Type]int{}
	for _, e := range a.Events {
		types[e.Type]++
	}
	for _, ty := range []event.Type{event.OrderPlaced, event.PaymentConfirmed, event.OrderShipped, event.OrderCancelled, event.OrderLinesChanged, event.OrderAllocateForShipment} {
		if types[ty] == 0 {
			t.Errorf("no %s in the workload", ty)
		}
	}
}
