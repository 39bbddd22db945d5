package intake

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	var d event.ReservationExpiredData
	if err := json.Unmarshal(k.Example, &d); err != nil {
		t.Fatal(err)
	}
	// Under the very id junban would give it, and under any other.
	for _, id := range []string{event.ExpiryEventID("LC-1", d.HoldUntil), "e-1"} {
		body, err := json.Marshal(event.Order{EventID: id, Type: k.Type, LCID: "LC-1", Data: k.Example})
		if err != nil {
			t.Fatal(err)
		}
		out := w.Handle(context.Background(), queue.Message{ID: "m-1", Body: body})
		if out.Verdict != queue.Poison || !strings.HasPrefix(out.Reason, domain.ReasonJunbanEvent+": ") {
			t.Errorf("%s: %+v, want Poison with %s", id, out, domain.ReasonJunbanEvent)
		}
	}
}

// A sender's event under one of the names junban makes for itself is sent to the DLQ
// before any turn, for every kind: a quarantine's record ("E2~q1", "E2~q1.1"), a
// redriven event's operations ("G~1"), a reservation's expiry (event.ExpiryEventID,
// which a placement took to keep its hold from ever expiring), and an lcid SQS cannot
// carry ("FF-\uffff", whose results wedged its turn). Failed before event.OwnMark and
// U+FFFF were refused: each was submitted to its turn (here, a nil Turns: a panic).
func TestWorkerSendsJunbansOwnNamesToTheDLQ(t *testing.T) {
	w := &Worker{Log: zap.NewNop()}
	hold := event.ExpiryEventID("LC-1", time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC))
	for _, k := range domain.Kinds() {
		if k.Origin != domain.FromSender {
			continue
		}
		for _, o := range []event.Order{
			{EventID: "E2~q1"}, {EventID: "E2~q1.1"}, {EventID: "G~1"}, {EventID: hold},
			{EventID: "e-1", LCID: "FF-\uffff"}, {EventID: "e-1", LCID: "LC~1"},
		} {
			o.Type, o.LCID, o.Data = k.Type, cmp.Or(o.LCID, "LC-1"), k.Example
			body, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			out := w.Handle(context.Background(), queue.Message{ID: "m-1", Body: body})
			if out.Verdict != queue.Poison || !strings.HasPrefix(out.Reason, domain.ReasonInvalidID+": ") {
				t.Errorf("%s %s of %q: %+v, want Poison with %s", k.Type, o.EventID, o.LCID, out, domain.ReasonInvalidID)
			}
		}
	}
}
