package order_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

// The scan pattern "<prefix>:{*}:state" also matches the done key of an event id that
// ends in "}:state"; its value is a result, which decodes as a state with an order. The
// scan must name only real state keys' entities, never "LC-1}:done:e}:state"'s
// "LC-1}:done:e". (Fails with the brace check removed from stateKeyEntity: the scan
// returns [LC-1 LC-1}:done:e LC-1}:done:x:{y].)
func TestScanOrdersSkipsKeysThatAreNoStateKeys(t *testing.T) {
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	snap := &event.OrderSnapshot{LCID: "LC-1", Status: event.StatusPlaced}
	state, err := json.Marshal(domain.State{Seq: 1, Order: snap})
	if err != nil {
		t.Fatal(err)
	}
	result, err := json.Marshal(event.Result{EventID: "e}:state", Entity: "LC-1", LCID: "LC-1", Seq: 1,
		Type: event.OrderPlaced, Outcome: event.Applied, Order: snap})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{
		order.StateKey(prefix, "LC-1"):                      state,
		order.StateKey(prefix, "sku:A"):                     []byte(`{"seq":3}`),
		lockhandoff.Key(prefix, "LC-1", "done:e}:state"):    result,
		lockhandoff.Key(prefix, "LC-1", "done:x:{y}:state"): result,
		lockhandoff.Key(prefix, "LC-1", "done:plain-event"): result,
	}
	for k, v := range keys {
		if err := rc.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := order.NewStore(rc, prefix).ScanOrders(ctx, func(lcid string) error {
		got = append(got, lcid)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"LC-1"}; !slices.Equal(got, want) {
		t.Fatalf("scanned %q, want %q", got, want)
	}
}
