package outbound

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
)

func ptr[T any](v T) *T { return &v }

// exampleMessages are one message of each kind, as Write builds them.
func exampleMessages(t *testing.T) map[Kind][]byte {
	t.Helper()
	at := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	msg := func(k Kind, entity string, data any) []byte {
		m := Message{ID: "7d4b2c1e-0b7a-4f39-9a51-3c1f2d6e8a90", Kind: k, Entity: entity, Seq: 3, OccurredAt: at,
			CausedBy: Cause{EventID: "evt-1", Type: event.OrderPlaced}}
		if strings.HasPrefix(string(k), "stock.location_") {
			m.Location = "store-1"
		}
		if sku, ok := strings.CutPrefix(entity, event.SKUEntityPrefix); ok {
			m.SKU = sku
		} else {
			m.LCID = entity
		}
		var err error
		if m.Data, err = json.Marshal(data); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return map[Kind][]byte{
		OrderStatusChanged: msg(OrderStatusChanged, "LC-1", OrderStatusData{
			From: ptr("placed"), To: "placed", Allocation: ptr("allocated"), Paid: true, Mode: event.ModeShip,
			TargetDate: "2026-12-03",
			Lines: []event.SnapshotLine{{LineID: "1", SKU: "TEA-1", Qty: 3,
				Lots: []event.LotQty{{LotID: "L1", Qty: 2}, {LotID: "L9", Qty: 1, Location: "wh-2"}}}},
			Locations: ByLocation([]event.SnapshotLine{{LineID: "1", SKU: "TEA-1", Qty: 3,
				Lots: []event.LotQty{{LotID: "L1", Qty: 2}, {LotID: "L9", Qty: 1, Location: "wh-2"}}}}),
			Changed: []string{"allocation", "lines"},
		}),
		OrderRefused: msg(OrderRefused, "LC-1", OrderRefusedData{Reason: "ERR_SHORTAGE", Detail: "short by 2", Status: "rejected"}),
		StockChanged: msg(StockChanged, "sku:TEA-1", StockData{Version: 12, SafetyStock: 2, Sellable: 40, Reserved: 3,
			Allocated: 5, AvailableToShip: 38, AsOf: "2026-12-02", Level: LevelOK, Threshold: 10, Locations: []LocationStock{
				{Location: "default", Network: true, Sellable: 40, Reserved: 3, Allocated: 5, AvailableToShip: 38, Level: LevelOK},
				{Location: "store-1", Sellable: 4, AvailableToShip: 2, Level: LevelLow}}}),
		StockLow:  msg(StockLow, "sku:TEA-1", StockLevelData{AvailableToShip: 4, Threshold: 10, Level: LevelLow, Previous: LevelOK, AsOf: "2026-12-02"}),
		StockOut:  msg(StockOut, "sku:TEA-1", StockLevelData{AvailableToShip: 0, Threshold: 10, Level: LevelOut, Previous: LevelLow, AsOf: "2026-12-02"}),
		StockBack: msg(StockBack, "sku:TEA-1", StockLevelData{AvailableToShip: 25, Threshold: 10, Level: LevelOK, Previous: LevelOut, AsOf: "2026-12-02"}),
		StockLocationLow: msg(StockLocationLow, "sku:TEA-1", StockLevelData{AvailableToShip: 2, Threshold: 10, Level: LevelLow,
			Previous: LevelOK, AsOf: "2026-12-02"}),
		StockLocationOut: msg(StockLocationOut, "sku:TEA-1", StockLevelData{AvailableToShip: 0, Threshold: 10, Level: LevelOut,
			Previous: LevelLow, AsOf: "2026-12-02"}),
		StockLocationBack: msg(StockLocationBack, "sku:TEA-1", StockLevelData{AvailableToShip: 25, Threshold: 10, Level: LevelOK,
			Previous: LevelOut, AsOf: "2026-12-02"}),
	}
}

func TestEveryKindHasASchemaAndItsMessagesPass(t *testing.T) {
	ex := exampleMessages(t)
	for _, k := range Kinds {
		if _, err := Schema(k); err != nil {
			t.Errorf("%s: no schema: %v", k, err)
			continue
		}
		b, ok := ex[k]
		if !ok {
			t.Errorf("%s: no example message", k)
			continue
		}
		if err := Validate(b); err != nil {
			t.Errorf("%s: %v\n%s", k, err, b)
		}
	}
}

// A consumer that validates what it receives survives a field added within a version
// (docs/events.md, "Versions"): a message with a field its schema does not name, at the
// top, in data, or in a nested object, passes; and every message says its version.
func TestSchemasTakeAnAddedField(t *testing.T) {
	for k, b := range exampleMessages(t) {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["version"] != event.Version {
			t.Errorf("%s: version %v, want %q", k, m["version"], event.Version)
		}
		m["added_later"] = "x"
		m["data"].(map[string]any)["added_later"] = 1
		m["caused_by"].(map[string]any)["added_later"] = true
		if lines, ok := m["data"].(map[string]any)["lines"].([]any); ok {
			lines[0].(map[string]any)["added_later"] = []int{1}
		}
		added, _ := json.Marshal(m)
		if err := Validate(added); err != nil {
			t.Errorf("%s with added fields: %v\n%s", k, err, added)
		}
	}
}

// TestSchemasRefuse: each schema refuses what breaks its contract, so a test that validates
// what it received can fail.
func TestSchemasRefuse(t *testing.T) {
	ex := exampleMessages(t)
	edit := func(k Kind, f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(ex[k], &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	data := func(m map[string]any) map[string]any { return m["data"].(map[string]any) }
	cases := map[string][]byte{
		"not JSON":             []byte("{"),
		"unknown kind":         edit(StockChanged, func(m map[string]any) { m["kind"] = "stock.gone" }),
		"seq 0":                edit(StockChanged, func(m map[string]any) { m["seq"] = 0 }),
		"id not a UUID":        edit(StockChanged, func(m map[string]any) { m["id"] = "x" }),
		"no caused_by":         edit(OrderRefused, func(m map[string]any) { delete(m, "caused_by") }),
		"order on a sku":       edit(OrderRefused, func(m map[string]any) { m["entity"] = "sku:TEA-1" }),
		"stock on an order":    edit(StockChanged, func(m map[string]any) { m["entity"] = "LC-1" }),
		"no version":           edit(StockChanged, func(m map[string]any) { delete(m, "version") }),
		"unknown version":      edit(StockChanged, func(m map[string]any) { m["version"] = "2" }),
		"negative available":   edit(StockChanged, func(m map[string]any) { data(m)["available_to_ship"] = -1 }),
		"reason not a code":    edit(OrderRefused, func(m map[string]any) { data(m)["reason"] = "shortage" }),
		"unknown status":       edit(OrderStatusChanged, func(m map[string]any) { data(m)["to"] = "lost" }),
		"nothing changed":      edit(OrderStatusChanged, func(m map[string]any) { data(m)["changed"] = []string{} }),
		"hold_until not time":  edit(OrderStatusChanged, func(m map[string]any) { data(m)["hold_until"] = "tomorrow" }),
		"low that is out":      edit(StockLow, func(m map[string]any) { data(m)["level"] = "out" }),
		"back from ok":         edit(StockBack, func(m map[string]any) { data(m)["previous"] = "ok" }),
		"occurred_at not time": edit(StockOut, func(m map[string]any) { m["occurred_at"] = "yesterday" }),
		"order location without lots": edit(OrderStatusChanged, func(m map[string]any) {
			data(m)["locations"].([]any)[0].(map[string]any)["lines"].([]any)[0].(map[string]any)["lots"] = []any{}
		}),
		"location out without location": edit(StockLocationOut, func(m map[string]any) { delete(m, "location") }),
		"location not an id":            edit(StockLocationLow, func(m map[string]any) { m["location"] = "a b" }),
		"location without network":      edit(StockChanged, func(m map[string]any) { delete(data(m)["locations"].([]any)[0].(map[string]any), "network") }),
	}
	for name, b := range cases {
		if err := Validate(b); err == nil {
			t.Errorf("%s: passed\n%s", name, b)
		}
	}
}
