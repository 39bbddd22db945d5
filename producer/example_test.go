package producer_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/junban/junban/producer"
)

// An order.placed built, checked by junban's decoder, and made ready for a FIFO orders
// queue; an event the order-worker would refuse is refused here, with its reason.
func ExampleNew() {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	ev, err := producer.New(producer.OrderPlaced, "evt-1001", "LC-1001", at, producer.OrderData{
		Mode:       producer.ModeShip,
		TargetDate: "2026-12-03",
		Lines:      []producer.Line{{LineID: "1", SKU: "TEA-GREEN-100G", Qty: 2}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := producer.Prepare(ev)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(m.Body))
	fmt.Println("group:", m.GroupID, "deduplication:", m.DeduplicationID)

	_, err = producer.New(producer.OrderPlaced, "evt-1002", "LC-1002", at, producer.OrderData{
		Mode: producer.ModeShip, TargetDate: "2026-12-03",
		Lines: []producer.Line{{LineID: "1", SKU: "TEA-GREEN-100G", Qty: 0}},
	})
	fmt.Println("refused:", producer.Reason(err))

	_, err = producer.New(producer.InventoryHeld, "wh-7", "", at, producer.LotQtyData{SKU: "TEA-GREEN-100G", LotID: "L-1", Qty: 3})
	fmt.Println("refused:", producer.Reason(err))
	var invalid *producer.InvalidError
	fmt.Println(errors.As(err, &invalid), invalid.Detail)
	// Output:
	// {"event_id":"evt-1001","type":"order.placed","version":"1","lcid":"LC-1001","occurred_at":"2026-12-01T09:30:00Z","data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"TEA-GREEN-100G","qty":2}]}}
	// group: LC-1001 deduplication: {LC-1001}evt-1001
	// refused: ERR_INVALID_QUANTITY
	// refused: ERR_MISSING_FIELD
	// true data.sku, data.lot_id and data.reason are required
}

// The PutEvents entry of a warehouse event, for an EventBridge rule whose target is the
// orders queue: detail-type is the event's type.
func ExampleForEventBridge() {
	ev, err := producer.New(producer.InventoryAdjusted, "wh-8", "", time.Time{},
		producer.InventoryAdjustedData{SKU: "TEA-GREEN-100G", LotID: "L-1", Delta: -2, Reason: "count"})
	if err != nil {
		fmt.Println(err)
		return
	}
	entry, err := producer.ForEventBridge(ev, "shop.wms")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(entry.Source, entry.DetailType)
	fmt.Println(entry.Detail)
	// Output:
	// shop.wms inventory.adjusted
	// {"event_id":"wh-8","type":"inventory.adjusted","version":"1","occurred_at":"0001-01-01T00:00:00Z","data":{"sku":"TEA-GREEN-100G","lot_id":"L-1","delta":-2,"reason":"count"}}
}
