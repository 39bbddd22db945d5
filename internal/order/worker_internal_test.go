package order

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/queue"
)

// The order-worker sends an order event whose lcid is in a SKU's namespace to the DLQ with
// its reason, before any turn: the Worker has no Turns, and one it reached would panic.
// Failed against the decode that checked the lcid with event.CheckID alone: the worker
// submitted the event to the turn "sku:SKU-B" (here, a nil Turns: a panic).
func TestWorkerSendsAnLCIDInASKUsNamespaceToTheDLQ(t *testing.T) {
	w := &Worker{Log: zap.NewNop()}
	for _, k := range domain.Kinds() {
		if k.Entity != domain.OnOrder {
			continue
		}
		body, err := json.Marshal(event.Order{EventID: "e-1", Type: k.Type, LCID: "sku:SKU-B", Data: k.Example})
		if err != nil {
			t.Fatal(err)
		}
		out := w.Handle(context.Background(), queue.Message{ID: "m-" + string(k.Type), Body: body})
		if out.Verdict != queue.Poison || !strings.HasPrefix(out.Reason, domain.ReasonInvalidID+": lcid") || !strings.Contains(out.Reason, `"sku:SKU-B"`) {
			t.Errorf("%s with lcid sku:SKU-B: %+v, want Poison with %s naming the lcid", k.Type, out, domain.ReasonInvalidID)
		}
	}
}

// An order.reservation_expired arriving on the orders queue is refused before any turn
// (the Worker has no Turns: one it reached would panic): only the order-worker's scanner
// submits it, so a sender cannot expire a reservation. Failed without the check (a panic
// on the nil Turns, where a real worker would have expired the hold it names).
func TestWorkerRefusesAnExpiryFromTheQueue(t *testing.T) {
	w := &Worker{Log: zap.NewNop()}
	k := domain.KindOf(event.OrderReservationExpired)
	if k == nil {
		t.Fatal("order.reservation_expired is not registered")
	}
	body, err := json.Marshal(event.Order{EventID: "e-1", Type: k.Type, LCID: "LC-1", Data: k.Example})
	if err != nil {
		t.Fatal(err)
	}
	out := w.Handle(context.Background(), queue.Message{ID: "m-1", Body: body})
	if out.Verdict != queue.Poison || !strings.HasPrefix(out.Reason, domain.ReasonJunbanEvent+": ") {
		t.Errorf("%+v, want Poison with %s", out, domain.ReasonJunbanEvent)
	}
}
