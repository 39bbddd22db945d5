package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
)

// refusal is a body Decode refuses, and the reason it gives.
type refusal struct {
	name, body, reason string
}

// refusals are the decoder's refusal cases: TestDecodeRejectsBadInputWithAReason holds
// Decode to them, TestSchemasAndTheDecodersRefusals the published JSON Schemas.
func refusals() []refusal {
	placed := func(data string) string {
		return `{"event_id":"e1","type":"order.placed","lcid":"LC-1","data":` + data + `}`
	}
	return []refusal{
		{"malformed json", `{"event_id":`, ReasonMalformedJSON},
		{"not an object", `[1,2]`, ReasonMalformedJSON},
		{"trailing data", `{"event_id":"e1","type":"payment.confirmed","lcid":"L"} {}`, ReasonMalformedJSON},
		{"unknown type", `{"event_id":"e1","type":"order.exploded","lcid":"LC-1"}`, ReasonUnknownType},
		{"missing type", `{"event_id":"e1","lcid":"LC-1"}`, ReasonMissingField},
		{"missing event id", `{"type":"payment.confirmed","lcid":"LC-1"}`, ReasonMissingField},
		{"missing lcid", `{"event_id":"e1","type":"payment.confirmed"}`, ReasonMissingField},
		{"missing data", `{"event_id":"e1","type":"order.placed","lcid":"LC-1"}`, ReasonMissingField},
		{"zero quantity", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":0}]}`), ReasonInvalidQuantity},
		{"negative quantity", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":-3}]}`), ReasonInvalidQuantity},
		{"fractional quantity", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1.5}]}`), ReasonMalformedJSON},
		{"duplicate line", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1},{"line_id":"1","sku":"T","qty":1}]}`), ReasonDuplicateLine},
		{"unknown mode", placed(`{"mode":"teleport","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}]}`), ReasonInvalidMode},
		{"bad date", placed(`{"mode":"ship","target_date":"2026-13-01","lines":[{"line_id":"1","sku":"S","qty":1}]}`), ReasonInvalidDate},
		{"no lines", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[]}`), ReasonMissingField},
		{"line without sku", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","qty":1}]}`), ReasonMissingField},
		{"unknown data field", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[],"surprise":1}`), ReasonMalformedJSON},
		{"location with a space", `{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"onhand","sellable":1,"location":"wh 2"}}`, ReasonInvalidLocation},
		{"location too long", `{"event_id":"e1","type":"inventory.held","data":{"sku":"S","lot_id":"L","qty":1,"reason":"r","location":"` + strings.Repeat("w", 65) + `"}}`, ReasonInvalidLocation},
		{"junban's own name as a location", `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","lot_id":"L","delta":1,"reason":"count","location":"~default"}}`, ReasonInvalidLocation},
		{"location not a string", `{"event_id":"e1","type":"inventory.lot_recalled","data":{"sku":"S","lot_id":"L","reason":"r","location":7}}`, ReasonMalformedJSON},
		{"received at a non-ASCII location", `{"event_id":"e1","type":"inventory.received","data":{"sku":"S","lot_id":"L","best_before":"2027-01-01","location":"倉庫"}}`, ReasonInvalidLocation},
		{"closest without ship_to", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["closest"]}`), ReasonInvalidRoute},
		{"an unknown strategy", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["cheapest"]}`), ReasonInvalidRoute},
		{"a strategy twice", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["ranked","ranked"]}`), ReasonInvalidRoute},
		{"ship_to off the globe", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"ship_to":{"lat":91,"lon":0}}`), ReasonInvalidRoute},
		{"pinned without a pickup location", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["pinned"]}`), ReasonInvalidRoute},
		{"a pickup location that is no location id", placed(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"pickup_location":"the store"}`), ReasonInvalidLocation},
		{"routing on a change", `{"event_id":"e1","type":"order.lines_changed","lcid":"LC-1","data":{"lines":[{"line_id":"1","sku":"S","qty":1}],"no_split":true}}`, ReasonInvalidRoute},
		{"adjust by zero", `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","lot_id":"L","delta":0,"reason":"count"}}`, ReasonInvalidQuantity},
		{"receive without lot", `{"event_id":"e1","type":"inventory.received","data":{"sku":"S","best_before":"2027-01-01"}}`, ReasonMissingField},
		{"oversized", `{"event_id":"e1","type":"payment.confirmed","lcid":"` + strings.Repeat("x", MaxEventBytes) + `"}`, ReasonTooLarge},
		{"hold_until not a time", placed(`{"mode":"reserve","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"hold_until":"tomorrow"}`), ReasonMalformedJSON},
		{"expiry without its hold", `{"event_id":"e1","type":"order.reservation_expired","lcid":"LC-1","data":{}}`, ReasonMissingField},
		{"extension with an unknown field", `{"event_id":"e1","type":"order.reservation_extended","lcid":"LC-1","data":{"hold_until":"2026-12-01T00:00:00Z","days":3}}`, ReasonMalformedJSON},
		{"unknown version", `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":"2"}`, ReasonUnsupportedVersion},
		{"empty-looking version", `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":" 1"}`, ReasonUnsupportedVersion},
		{"version not a string", `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":1}`, ReasonMalformedJSON},
		{"brace in the lcid", `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-{1}"}`, ReasonInvalidID},
		{"lcid in a SKU's namespace", `{"event_id":"e1","type":"payment.confirmed","lcid":"sku:LC-1"}`, ReasonInvalidID},
		{"own mark in the event id", `{"event_id":"e~1","type":"payment.confirmed","lcid":"LC-1"}`, ReasonInvalidID},
		{"event id over 255 bytes in 255 characters", `{"event_id":"` + strings.Repeat("é", 200) + `","type":"payment.confirmed","lcid":"LC-1"}`, ReasonIDTooLong},
		{"lot over its SKU's bound", `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","lot_id":"` + strings.Repeat("l", 201) + `","delta":1,"reason":"count"}}`, ReasonIDTooLong},
		{"uncarriable reason", `{"event_id":"e1","type":"inventory.held","data":{"sku":"S","lot_id":"L","qty":1,"reason":"r\uffff"}}`, ReasonUncarriable},
		{"control character in a reason", `{"event_id":"e1","type":"inventory.held","data":{"sku":"S","lot_id":"L","qty":1,"reason":"r\u0007"}}`, ReasonInvalidReason},
		{"quantity over the bound", `{"event_id":"e1","type":"inventory.damaged","data":{"sku":"S","lot_id":"L","qty":1000000000001,"reason":"r"}}`, ReasonInvalidQuantity},
		{"unknown lot kind", `{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"borrowed","sellable":1}}`, ReasonInvalidKind},
		{"valid_from after valid_to", `{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"onhand","valid_from":"2027-01-02","valid_to":"2027-01-01","sellable":1}}`, ReasonInvalidDate},
		{"best_before on a planned lot", `{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"planned","best_before":"2027-01-01","sellable":1}}`, ReasonInvalidDate},
		{"duplicate returned line", `{"event_id":"e1","type":"order.returned","lcid":"LC-1","data":{"lines":[{"line_id":"1","qty":1},{"line_id":"1","qty":1}]}}`, ReasonDuplicateLine},
		{"uncarriable hold_for", `{"event_id":"e1","type":"order.reservation_extended","lcid":"LC-1","data":{"hold_for":"1h\uffff"}}`, ReasonUncarriable},
		{"oversized within every field's bound", bigLinesChanged(700), ReasonTooLarge},
		{"negative safety stock", `{"event_id":"e1","type":"inventory.sku_registered","data":{"sku":"S","safety_stock":-1}}`, ReasonInvalidQuantity},
		{"transfer to its source", `{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T","from_location":"wh-2","to_location":"wh-2","qty":1,"arrives_at":"2026-12-05"}}`, ReasonInvalidLocation},
		{"transfer from no location", `{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T","to_location":"wh-2","qty":1,"arrives_at":"2026-12-05"}}`, ReasonInvalidLocation},
		{"transfer of nothing", `{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T","from_location":"default","to_location":"wh-2","qty":0,"arrives_at":"2026-12-05"}}`, ReasonInvalidQuantity},
		{"transfer arriving on no date", `{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T","from_location":"default","to_location":"wh-2","qty":1,"arrives_at":"soon"}}`, ReasonInvalidDate},
		{"transfer id with junban's mark", `{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T~2","from_location":"default","to_location":"wh-2","qty":1,"arrives_at":"2026-12-05"}}`, ReasonInvalidID},
		{"transfer without its id", `{"event_id":"e1","type":"inventory.transfer_cancelled","data":{"sku":"S"}}`, ReasonMissingField},
		{"transfer received with no count", `{"event_id":"e1","type":"inventory.transfer_received","data":{"sku":"S","transfer_id":"T"}}`, ReasonInvalidQuantity},
		{"transfer received with a lot", `{"event_id":"e1","type":"inventory.transfer_received","data":{"sku":"S","transfer_id":"T","qty":1,"lot_id":"L"}}`, ReasonMalformedJSON},
		{"transit lot named with junban's mark", `{"event_id":"e1","type":"inventory.held","data":{"sku":"S","lot_id":"T~L","qty":1,"reason":"r"}}`, ReasonInvalidID},
		{"transit lot's transfer with junban's mark", `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","transfer_id":"T~2","lot_id":"L","delta":1,"reason":"count"}}`, ReasonInvalidID},
		{"transit lot's transfer too long", `{"event_id":"e1","type":"inventory.lot_recalled","data":{"sku":"S","transfer_id":"` + strings.Repeat("T", 201) + `","lot_id":"L","reason":"r"}}`, ReasonIDTooLong},
		{"transit lot's transfer with a control character", `{"event_id":"e1","type":"inventory.damaged","data":{"sku":"S","transfer_id":"T\u0001","lot_id":"L","qty":1,"reason":"r"}}`, ReasonInvalidID},
		{"a registered lot never names a transfer", `{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"onhand","sellable":1,"transfer_id":"T"}}`, ReasonMalformedJSON},
	}
}

// An event without a version follows event.Version; one that names it is the same event;
// any other is refused (refusals: "unknown version").
func TestDecodeVersion(t *testing.T) {
	for body, want := range map[string]string{
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1"}`:                                            event.Version,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":"1"}`:                              "1",
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":null}`:                             event.Version,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","Version":"1"}`:                              "1",
		`{"event_id":"e1","type":"junban.drain","lcid":"sku:S","version":"1"}`:                                  "1",
		`{"event_id":"e1","type":"inventory.sku_registered","version":"1","data":{"sku":"S","safety_stock":1}}`: "1",
	} {
		ev, err := Decode([]byte(body), 0)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := ev.ContractVersion(); got != want {
			t.Errorf("%s: version %q, want %q", body, got, want)
		}
	}
	_, err := Decode([]byte(`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","version":"2"}`), 0)
	var ie *InvalidError
	if !errors.As(err, &ie) || ie.Reason != ReasonUnsupportedVersion || !strings.Contains(ie.Detail, `"2"`) {
		t.Errorf("version 2: %v, want %s naming the version", err, ReasonUnsupportedVersion)
	}
}

// bigLinesChanged is an order.lines_changed of n lines, each id at its bound.
func bigLinesChanged(n int) string {
	var b strings.Builder
	b.WriteString(`{"event_id":"e1","type":"order.lines_changed","lcid":"LC-1","data":{"lines":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("%0*d", stock.MaxIDLen, i)
		fmt.Fprintf(&b, `{"line_id":"%s","sku":"%s","qty":1}`, id, id)
	}
	b.WriteString(`]}}`)
	return b.String()
}

func TestDecodeRejectsBadInputWithAReason(t *testing.T) {
	for _, c := range refusals() {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.body), 0)
			if err == nil {
				t.Fatalf("accepted %s", c.body)
			}
			if got := InvalidReason(err); got != c.reason {
				t.Fatalf("reason %q, want %q (%v)", got, c.reason, err)
			}
		})
	}
}

// Ids over event.MaxIDLength are refused with their own reason: persisted, a result with an
// id of a few KB made PostgreSQL refuse its index row and stalled the result's batch.
func TestDecodeRejectsOverLongIDs(t *testing.T) {
	at, over := strings.Repeat("x", event.MaxIDLength), strings.Repeat("x", event.MaxIDLength+1)
	// SKU and lot ids are bounded as the ledger bounds them.
	skuAt, skuOver := strings.Repeat("s", stock.MaxIDLen), strings.Repeat("s", stock.MaxIDLen+1)
	placed := func(eventID, lcid, lineID, sku string) string {
		return `{"event_id":"` + eventID + `","type":"order.placed","lcid":"` + lcid + `","data":{"mode":"ship","target_date":"2026-12-01","lines":[` +
			`{"line_id":"1","sku":"S","qty":1},{"line_id":"` + lineID + `","sku":"` + sku + `","qty":1}]}}`
	}
	adjusted := func(sku, lot string) string {
		return `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"` + sku + `","lot_id":"` + lot + `","delta":-1,"reason":"count"}}`
	}
	received := func(sku, lot string) string {
		return `{"event_id":"e1","type":"inventory.received","data":{"sku":"` + sku + `","lot_id":"` + lot + `","best_before":"2027-01-01"}}`
	}
	drain := func(entity string) string { return `{"event_id":"e1","type":"junban.drain","lcid":"` + entity + `"}` }
	refused := map[string]string{
		"event_id":        placed(over, "LC-1", "2", "S"),
		"event_id (3 KB)": `{"event_id":"` + strings.Repeat("e", 3000) + `","type":"payment.confirmed","lcid":"LC-1"}`,
		"lcid":            placed("e1", over, "2", "S"),
		"lcid (3 KB)":     `{"event_id":"e1","type":"order.cancelled","lcid":"` + strings.Repeat("l", 3000) + `"}`,
		"line_id":         placed("e1", "LC-1", over, "S"),
		"line sku":        placed("e1", "LC-1", "2", skuOver),
		"adjusted sku":    adjusted(skuOver, "L"),
		"adjusted lot_id": adjusted("S", skuOver),
		"received sku":    received(skuOver, "L"),
		"received lot_id": received("S", skuOver),
		"drain entity":    drain("sku:" + over),
	}
	for name, body := range refused {
		_, err := Decode([]byte(body), 0)
		if got := InvalidReason(err); got != ReasonIDTooLong {
			t.Errorf("over-long %s: reason %q (%v), want %s", name, got, err, ReasonIDTooLong)
		} else if len(err.Error()) > 200 {
			t.Errorf("over-long %s: the error quotes the id: %d bytes", name, len(err.Error()))
		}
	}
	accepted := map[string]string{
		"order":    placed(at, at, at, skuAt),
		"adjusted": adjusted(skuAt, skuAt),
		"received": received(skuAt, skuAt),
		"drain":    drain("sku:" + at),
	}
	for name, body := range accepted {
		if _, err := Decode([]byte(body), 0); err != nil {
			t.Errorf("%s with ids at the bound: %v", name, err)
		}
	}
}

// An lcid with a brace would break the hash tag of its order's keys.
func TestDecodeRejectsBracesInTheLCID(t *testing.T) {
	for _, lcid := range []string{"}x", "a{b}", "{"} {
		_, err := Decode([]byte(`{"event_id":"e1","type":"payment.confirmed","lcid":"`+lcid+`"}`), 0)
		if got := InvalidReason(err); got != ReasonInvalidID {
			t.Errorf("lcid %q: reason %q (%v), want %s", lcid, got, err, ReasonInvalidID)
		}
	}
}

func TestDecodeEntity(t *testing.T) {
	cases := map[string]string{
		`{"event_id":"e","type":"payment.confirmed","lcid":"LC-9"}`:                                                            "LC-9",
		`{"event_id":"e","type":"inventory.adjusted","data":{"sku":"SKU-1","lot_id":"L1","delta":-2,"reason":"breakage"}}`:     "sku:SKU-1",
		`{"event_id":"e","type":"inventory.received","data":{"sku":"SKU-2","lot_id":"L1","best_before":"2027-01-01","qty":5}}`: "sku:SKU-2",
		`{"event_id":"e","type":"junban.drain","lcid":"sku:SKU-3"}`:                                                            "sku:SKU-3",
	}
	for body, want := range cases {
		ev, err := Decode([]byte(body), 0)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if ev.Entity() != want {
			t.Errorf("%s: entity %q, want %q", body, ev.Entity(), want)
		}
	}
}

// FuzzDecode: Decode never panics; it refuses with a reason, or returns an event that
// has an entity, whose ids CheckID accepts, whose lcid (but a drain's entity) CheckLCID
// accepts, so that an order's entity is never a SKU's and a SKU's always is, and which
// encodes and decodes again to the same event.
func FuzzDecode(f *testing.F) {
	for _, lcid := range []string{"LC-1", "sku:SKU-B", "SKU:B", "注文-1", ""} {
		for _, body := range sampleBodies(lcid) {
			f.Add([]byte(body))
		}
	}
	for _, s := range []string{`{`, `[1]`, `null`, `{"event_id":"e1","type":"payment.confirmed","lcid":"L"} {}`,
		`{"event_id":"e1","TYPE":"payment.confirmed","LCID":"sku:X"}`,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"L","data":{"x":[1,2]},"extra":1}`,
		`{"event_id":"e1","type":"inventory.held","lcid":"LC-1","data":{"sku":"S","lot_id":"L","qty":1,"reason":"r"}}`,
		`{"event_id":"e1","type":"inventory.lot_registered","data":{"sku":"S","lot_id":"L","kind":"onhand","sellable":1,"location":"wh-2"}}`,
		`{"event_id":"e1","type":"inventory.damaged","data":{"sku":"S","lot_id":"L","qty":1,"reason":"r","location":"default"}}`,
		`{"event_id":"e1","type":"order.placed","lcid":"L","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["closest","ranked"],"ship_to":{"lat":52.5,"lon":13.4},"no_split":true}}`,
		`{"event_id":"e1","type":"order.placed","lcid":"L","data":{"mode":"reserve","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"allocation":["pinned"],"pickup_location":"store-1"}}`,
		`{"event_id":"e1","type":"junban.drain","lcid":"sku:{x}"}`,
		`{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T","from_location":"default","to_location":"wh-2","qty":3,"arrives_at":"2026-12-05"}}`,
		`{"event_id":"e1","type":"inventory.transfer_requested","data":{"sku":"S","transfer_id":"T~1","from_location":"wh-2","to_location":"wh-2","qty":0,"arrives_at":"2026-02-30"}}`,
		`{"event_id":"e1","type":"inventory.transfer_received","data":{"sku":"S","transfer_id":"T","qty":2}}`,
		`{"event_id":"e1","type":"inventory.transfer_received","data":{"sku":"S","transfer_id":"T","qty":-1,"lot_id":"L"}}`,
		`{"event_id":"e1","type":"inventory.transfer_cancelled","data":{"sku":"S","transfer_id":"T"}}`,
		`{"event_id":"e1","type":"inventory.safety_stock_changed","data":{"sku":"S","safety_stock":2,"location":"store-1"}}`,
		`{"event_id":"e1","type":"inventory.safety_stock_changed","data":{"sku":"S","safety_stock":-1,"location":"a~b"}}`,
		`{"event_id":"e1","type":"inventory.held","data":{"sku":"S","transfer_id":"T","lot_id":"L","qty":1,"reason":"r","location":"wh-2"}}`,
		`{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","transfer_id":"T~1","lot_id":"L","delta":-1,"reason":"count"}}`,
		`{"event_id":"e1","type":"inventory.lot_recalled","data":{"sku":"S","transfer_id":"","lot_id":"L","reason":"r"}}`,
		`{"event_id":"e1","type":"inventory.transfer_cancelled","data":{"sku":"S{","transfer_id":""}}`,
		`{"event_id":"e1","type":"order.allocation_moved","lcid":"L","data":{"line_id":"1~2","to_location":"wh 2"}}`,
		`{"event_id":"e1","type":"order.allocation_moved","lcid":"L","data":{"line_id":"1","to_location":"default"}}`,
		`{"event_id":"e1","type":"order.placed","lcid":"L","occurred_at":"2026-12-01T09:00:00Z","data":{"mode":"reserve","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"hold_until":"2026-12-01T18:00:00.1234567-05:00"}}`,
		`{"event_id":"e1","type":"order.placed","lcid":"L","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"hold_for":"-1h","hold_until":"0001-01-01T00:00:00Z"}}`,
		`{"event_id":"e1","type":"order.reservation_extended","lcid":"L","data":{"hold_for":"1e9h"}}`,
		`{"event_id":"e1","type":"order.reservation_expired","lcid":"L","data":{"hold_until":"9999-12-31T23:59:59.999999999Z"}}`,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"L","version":"1"}`,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"L","VERSION":"2"}`,
		`{"event_id":"e1","type":"payment.confirmed","lcid":"L","version":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := Decode(body, 0)
		if err != nil {
			if InvalidReason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		checkDecoded(t, ev)
		if !slices.Contains(event.Versions, ev.ContractVersion()) {
			t.Fatalf("accepted %s, of version %q", body, ev.ContractVersion())
		}
		again, err := json.Marshal(ev.Order)
		if err != nil {
			t.Fatalf("accepted %s, which does not encode: %v", body, err)
		}
		back, err := DecodeLimits(again, Limits{MaxBytes: max(len(again), MaxEventBytes)})
		if err != nil {
			t.Fatalf("accepted %s, refused its encoding %s: %v", body, again, err)
		}
		if !sameEvent(ev, back) {
			t.Fatalf("%s decodes to %+v,\nits encoding %s to %+v", body, ev, again, back)
		}
	})
}

// checkDecoded asserts what every decoded event holds.
func checkDecoded(t *testing.T, ev Event) {
	t.Helper()
	entity := ev.Entity()
	if ev.EventID == "" || entity == "" {
		t.Fatalf("event without id or entity: %+v", ev)
	}
	sku, inventory := ev.InventorySKU()
	switch {
	case inventory:
		if entity != SKUEntity(sku) {
			t.Fatalf("inventory event of %q in the turn %q", sku, entity)
		}
	case ev.Type == event.Drain:
		if entity != ev.LCID {
			t.Fatalf("drain of %q in the turn %q", ev.LCID, entity)
		}
	default:
		if entity != ev.LCID || strings.HasPrefix(entity, event.SKUEntityPrefix) {
			t.Fatalf("%s of lcid %q in the turn %q", ev.Type, ev.LCID, entity)
		}
	}
	if ev.Type != event.Drain {
		if err := event.CheckLCID(ev.LCID); err != nil {
			t.Fatalf("accepted lcid %q: %v", ev.LCID, err)
		}
	}
	ids := []string{ev.EventID, ev.LCID, sku}
	if d, ok := ev.Payload().(*event.OrderData); ok {
		for _, l := range d.Lines {
			if l.Qty <= 0 {
				t.Fatalf("accepted qty %d", l.Qty)
			}
			ids = append(ids, l.LineID, l.SKU)
		}
	}
	if d, ok := ev.Payload().(*event.ReturnedData); ok {
		for _, l := range d.Lines {
			ids = append(ids, l.LineID)
		}
	}
	ids = append(ids, lotOf(ev))
	if ev.Type == event.OrderReservationExpired {
		ids[0] = strings.TrimPrefix(ids[0], event.OwnMark) // junban's own event, in junban's own namespace
	}
	if b, err := json.Marshal(ev.Payload()); err != nil || !event.Carriable(string(b)) {
		t.Fatalf("accepted data that encodes to %q (%v), which SQS cannot carry", b, err)
	}
	for i, id := range ids {
		limit := event.MaxIDLength
		if i == 1 && ev.Type == event.Drain {
			limit += len(event.SKUEntityPrefix) // a drain's entity may be a SKU's
		}
		if err := event.CheckID(id); err != nil || len(id) > limit {
			t.Fatalf("accepted id %q (%d bytes): %v", id, len(id), err)
		}
	}
}

// lotOf returns the lot an inventory event names, or "".
func lotOf(ev Event) string {
	switch d := ev.Payload().(type) {
	case *event.InventoryReceivedData:
		return d.LotID
	case *event.InventoryAdjustedData:
		return d.LotID
	case *event.LotRegisteredData:
		return d.LotID
	case *event.LotQtyData:
		return d.LotID
	case *event.LotRecalledData:
		return d.LotID
	}
	return ""
}

// sameEvent compares two decoded events by what they say: the time as an instant, data
// by its decoded payload (an encoding compacts and escapes the raw bytes).
func sameEvent(a, b Event) bool {
	if !a.OccurredAt.Equal(b.OccurredAt) {
		return false
	}
	a.OccurredAt, b.OccurredAt = time.Time{}, time.Time{}
	a.Data, b.Data = nil, nil
	a.rawLength, b.rawLength = 0, 0
	return reflect.DeepEqual(a, b)
}

// A hold's instant decodes in UTC, truncated to microseconds (the snapshot's, the due
// index's and PostgreSQL's precision), whatever offset and precision it came with, so
// that an order.reservation_expired names the hold exactly as the order keeps it.
func TestDecodeNormalizesHolds(t *testing.T) {
	want := time.Date(2026, 12, 1, 9, 30, 0, 123456000, time.UTC)
	samples := sampleBodies("LC-1")
	ev, err := Decode([]byte(samples[event.OrderReservationExpired]), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Payload().(*event.ReservationExpiredData).HoldUntil; !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("expiry's hold_until %v, want %v", got, want)
	}
	body := `{"event_id":"e1","type":"order.placed","lcid":"L","data":{"mode":"reserve","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":1}],"hold_until":"2026-12-01T18:30:00.123456999+09:00"}}`
	ev, err = Decode([]byte(body), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Payload().(*event.OrderData).HoldUntil; got == nil || !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("order.placed's hold_until %v, want %v", got, want)
	}
}

// manyLines is an order.placed of n lines on one SKU.
func manyLines(eventID, lcid string, n int) []byte {
	d := event.OrderData{Mode: stock.ModeShip, TargetDate: "2026-12-01"}
	for i := range n {
		d.Lines = append(d.Lines, event.Line{LineID: fmt.Sprintf("line-%04d", i), SKU: "SKU-ONE", Qty: 1})
	}
	data, _ := json.Marshal(d)
	body, _ := json.Marshal(event.Order{EventID: eventID, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(), Data: data})
	return body
}

// An order of more lines than the bound is refused with its own reason, whatever its body's
// size: 2,500 lines on one SKU fit in 121 KB, and their result (1.2 MB) in no SQS message.
func TestDecodeRefusesTooManyLines(t *testing.T) {
	big := manyLines("e1", "LC-1", 2500)
	if len(big) > MaxEventBytes {
		t.Fatalf("the test's order is %d bytes: over the body limit, it would be refused for that", len(big))
	}
	for _, lim := range []Limits{{MaxLines: MaxLinesDefault}, {}} {
		_, err := DecodeLimits(big, lim)
		if got := InvalidReason(err); got != ReasonTooManyLines {
			t.Errorf("limits %+v: reason %q (%v), want %s", lim, got, err, ReasonTooManyLines)
		}
	}
	const bound = 7
	if _, err := DecodeLimits(manyLines("e1", "LC-1", bound), Limits{MaxLines: bound}); err != nil {
		t.Errorf("%d lines at the bound %d: %v", bound, bound, err)
	}
	if _, err := DecodeLimits(manyLines("e1", "LC-1", bound+1), Limits{MaxLines: bound}); InvalidReason(err) != ReasonTooManyLines {
		t.Errorf("%d lines over the bound %d: %v", bound+1, bound, err)
	}
	changed, _ := json.Marshal(event.Order{EventID: "e2", Type: event.OrderLinesChanged, LCID: "LC-1",
		Data: json.RawMessage(`{"lines":[{"line_id":"1","sku":"S","qty":1},{"line_id":"2","sku":"S","qty":1}]}`)})
	if _, err := DecodeLimits(changed, Limits{MaxLines: 1}); InvalidReason(err) != ReasonTooManyLines {
		t.Errorf("order.lines_changed over the bound: %v", err)
	}
}

// The bound of a turn's decode is the highest a worker may be set to: an event one worker
// accepted still decodes in the turn, whichever worker runs it.
func TestDecodeInATurnAcceptsWhatAnyWorkerMay(t *testing.T) {
	if _, err := Decode(manyLines("e1", "LC-1", MaxLinesLimit), 0); err != nil {
		t.Fatalf("%d lines: %v", MaxLinesLimit, err)
	}
	if _, err := Decode(manyLines("e1", "LC-1", MaxLinesLimit+1), 0); InvalidReason(err) != ReasonTooManyLines {
		t.Fatalf("%d lines: %v", MaxLinesLimit+1, err)
	}
}

// badIDs are ids that no event may carry: each would be refused at every attempt further
// on (a brace by lockhandoff.CheckEntity or the ledger's hash tags, a control character by
// the ledger's text records), so Decode refuses them for good.
var badIDs = map[string]string{
	"open brace":  "A{1",
	"close brace": "A}1",
	"hash tag":    "{x}",
	"NUL":         "A\x00B",
	"newline":     "A\nB",
	"tab":         "A\tB",
	"escape":      "A\x1bB",
	"DEL":         "A\x7fB",
	"C1 control":  "A\u0085B",
	// junban's own names: a quarantine's record, a redriven event's operations, an expiry.
	"quarantine name": "E2~q1",
	"quarantine part": "E2~q1.1",
	"redrive name":    "G~1",
	"expiry name":     "~expiry:1796036400000000:LC-1",
	// What SQS and SNS cannot carry: every result naming it would be refused.
	"U+FFFF": "FF-\uffff",
	"U+FFFE": "FF-\ufffe",
}

// TestDecodeRefusesBadIDs: every id of every event type, with each bad character.
func TestDecodeRefusesBadIDs(t *testing.T) {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	placed := func(eventID, lcid, lineID, sku string) string {
		return `{"event_id":` + q(eventID) + `,"type":"order.placed","lcid":` + q(lcid) + `,"data":{"mode":"ship","target_date":"2026-12-01","lines":[` +
			`{"line_id":"1","sku":"S","qty":1},{"line_id":` + q(lineID) + `,"sku":` + q(sku) + `,"qty":1}]}}`
	}
	changed := func(lineID, sku string) string {
		return `{"event_id":"e1","type":"order.lines_changed","lcid":"LC-1","data":{"lines":[{"line_id":` + q(lineID) + `,"sku":` + q(sku) + `,"qty":1}]}}`
	}
	adjusted := func(sku, lot string) string {
		return `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":` + q(sku) + `,"lot_id":` + q(lot) + `,"delta":-1,"reason":"count"}}`
	}
	received := func(sku, lot string) string {
		return `{"event_id":"e1","type":"inventory.received","data":{"sku":` + q(sku) + `,"lot_id":` + q(lot) + `,"best_before":"2027-01-01"}}`
	}
	fields := map[string]func(id string) string{
		"event_id":             func(id string) string { return placed(id, "LC-1", "2", "S") },
		"lcid":                 func(id string) string { return placed("e1", id, "2", "S") },
		"lcid of a payment":    func(id string) string { return `{"event_id":"e1","type":"payment.confirmed","lcid":` + q(id) + `}` },
		"line_id":              func(id string) string { return placed("e1", "LC-1", id, "S") },
		"line sku":             func(id string) string { return placed("e1", "LC-1", "2", id) },
		"changed line_id":      func(id string) string { return changed(id, "S") },
		"changed line sku":     func(id string) string { return changed("1", id) },
		"adjusted sku":         func(id string) string { return adjusted(id, "L") },
		"adjusted lot_id":      func(id string) string { return adjusted("S", id) },
		"received sku":         func(id string) string { return received(id, "L") },
		"received lot_id":      func(id string) string { return received("S", id) },
		"drain entity":         func(id string) string { return `{"event_id":"e1","type":"junban.drain","lcid":` + q("sku:"+id) + `}` },
		"event_id of a cancel": func(id string) string { return `{"event_id":` + q(id) + `,"type":"order.cancelled","lcid":"LC-1"}` },
	}
	for field, body := range fields {
		if _, err := Decode([]byte(body("OK-1")), 0); err != nil {
			t.Fatalf("%s: the good variant is refused: %v", field, err)
		}
		for name, id := range badIDs {
			_, err := Decode([]byte(body(id)), 0)
			if got := InvalidReason(err); got != ReasonInvalidID {
				t.Errorf("%s with %s: reason %q (%v), want %s", field, name, got, err, ReasonInvalidID)
			}
		}
	}
}

// sampleBodies holds a valid body of every event type, an order's with the lcid given
// (a drain's names it as the entity to drain): the decode tests' and FuzzDecode's seeds.
// A kind without a sample of its own gets its registered example;
// TestSampleBodiesCoverEveryType fails for a type of internal/event with neither.
func sampleBodies(lcid string) map[event.Type]string {
	q, _ := json.Marshal(lcid)
	order := func(typ event.Type, data string) string {
		b := `{"event_id":"e-` + string(typ) + `","type":"` + string(typ) + `","lcid":` + string(q) + `,"occurred_at":"2026-12-01T09:30:00Z"`
		if data != "" {
			b += `,"data":` + data
		}
		return b + `}`
	}
	sku := func(typ event.Type, data string) string {
		return `{"event_id":"e-` + string(typ) + `","type":"` + string(typ) + `","occurred_at":"2026-12-01T08:00:00+09:00","data":` + data + `}`
	}
	samples := map[event.Type]string{
		event.OrderPlaced:                 order(event.OrderPlaced, `{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"SKU-A","qty":2},{"line_id":"2","sku":"SKU-B","qty":1}]}`),
		event.OrderLinesChanged:           order(event.OrderLinesChanged, `{"lines":[{"line_id":"1","sku":"SKU-A","qty":3}]}`),
		event.PaymentConfirmed:            order(event.PaymentConfirmed, ""),
		event.OrderAllocateForShipment:    order(event.OrderAllocateForShipment, ""),
		event.OrderCancelled:              order(event.OrderCancelled, ""),
		event.OrderShipped:                order(event.OrderShipped, ""),
		event.OrderReturned:               order(event.OrderReturned, `{"lines":[{"line_id":"1","qty":1}],"defective":true}`),
		event.OrderAllocationMoved:        order(event.OrderAllocationMoved, `{"line_id":"1","to_location":"store-1"}`),
		event.InventoryReceived:           sku(event.InventoryReceived, `{"sku":"SKU-B","lot_id":"L1","best_before":"2027-01-01","qty":5}`),
		event.InventoryAdjusted:           sku(event.InventoryAdjusted, `{"sku":"SKU-B","lot_id":"L1","delta":-2,"reason":"count"}`),
		event.InventorySKURegistered:      sku(event.InventorySKURegistered, `{"sku":"SKU-B","safety_stock":3}`),
		event.InventorySafetyStockChanged: sku(event.InventorySafetyStockChanged, `{"sku":"SKU-B","safety_stock":0}`),
		event.InventoryLotRegistered:      sku(event.InventoryLotRegistered, `{"sku":"SKU-B","lot_id":"L2","kind":"planned","arrives_at":"2026-12-10","valid_from":"2026-12-10","valid_to":"2027-06-30","sellable":40}`),
		event.InventoryHeld:               sku(event.InventoryHeld, `{"sku":"SKU-B","lot_id":"L1","qty":2,"reason":"inspection"}`),
		event.InventoryReleasedHold:       sku(event.InventoryReleasedHold, `{"sku":"SKU-B","lot_id":"L1","qty":2,"reason":"inspection passed"}`),
		event.InventoryDamaged:            sku(event.InventoryDamaged, `{"sku":"SKU-B","lot_id":"L1","qty":1,"reason":"dropped"}`),
		event.InventoryLotRecalled:        sku(event.InventoryLotRecalled, `{"sku":"SKU-B","lot_id":"L1","reason":"supplier recall"}`),
		event.InventoryTransferRequested:  sku(event.InventoryTransferRequested, `{"sku":"SKU-B","transfer_id":"TR-9","from_location":"wh-2","to_location":"default","qty":4,"arrives_at":"2026-12-04"}`),
		event.InventoryTransferReceived:   sku(event.InventoryTransferReceived, `{"sku":"SKU-B","transfer_id":"TR-9","qty":3}`),
		event.InventoryTransferCancelled:  sku(event.InventoryTransferCancelled, `{"sku":"SKU-B","transfer_id":"TR-9"}`),
		event.OrderReservationExtended:    order(event.OrderReservationExtended, `{"hold_for":"30m"}`),
		event.OrderReservationExpired:     order(event.OrderReservationExpired, `{"hold_until":"2026-12-01T18:30:00.123456789+09:00"}`),
		event.Drain:                       order(event.Drain, ""),
	}
	// A kind without a sample of its own here gets its registered example.
	for _, k := range Kinds() {
		if _, ok := samples[k.Type]; !ok {
			if k.Entity == OnSKU {
				samples[k.Type] = sku(k.Type, string(k.Example))
			} else {
				samples[k.Type] = order(k.Type, string(k.Example))
			}
		}
	}
	return samples
}

// orderTypes are the types whose entity is their lcid.
var orderTypes = []event.Type{event.OrderPlaced, event.OrderLinesChanged, event.PaymentConfirmed,
	event.OrderAllocateForShipment, event.OrderCancelled, event.OrderShipped, event.OrderReturned,
	event.OrderAllocationMoved, event.OrderReservationExtended, event.OrderReservationExpired}

// Every Type constant of internal/event has a sample body, and each decodes.
func TestSampleBodiesCoverEveryType(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "../event/event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	samples := sampleBodies("LC-1")
	var n int
	for _, d := range file.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Type" {
				continue
			}
			for _, val := range v.Values {
				lit := val.(*ast.BasicLit)
				typ, _ := strconv.Unquote(lit.Value)
				n++
				if _, ok := samples[event.Type(typ)]; !ok {
					t.Errorf("no sample body of %s", typ)
				}
			}
		}
	}
	if n != len(samples) {
		t.Errorf("%d event types in event.go, %d sample bodies", n, len(samples))
	}
	for typ, body := range samples {
		if ev, err := Decode([]byte(body), 0); err != nil || ev.Type != typ {
			t.Errorf("sample of %s: %v", typ, err)
		}
	}
}

// An lcid in a SKU's namespace would put an order's events in that SKU's turn, among the
// warehouse's events, and its state under the SKU's keys: every event that carries an
// lcid refuses one, for good (ERR_INVALID_ID). A drain names an entity, which may be a
// SKU's, and still decodes. Failed against the decode that checked the lcid with
// event.CheckID alone: every one was accepted, with the entity "sku:SKU-B".
func TestDecodeRefusesAnLCIDInASKUsNamespace(t *testing.T) {
	for _, lcid := range []string{"sku:SKU-B", "sku:", "sku:LC-1"} {
		for typ, body := range sampleBodies(lcid) {
			if typ == event.Drain {
				continue
			}
			if _, inventory := skuOf(t, typ); inventory {
				// An inventory event's lcid names no entity; it is held to the same rule,
				// since its result carries it as an order's.
				var m map[string]any
				_ = json.Unmarshal([]byte(body), &m)
				m["lcid"] = lcid
				b, _ := json.Marshal(m)
				body = string(b)
			}
			ev, err := Decode([]byte(body), 0)
			if got := InvalidReason(err); got != ReasonInvalidID {
				t.Errorf("%s with lcid %q: entity %q, reason %q (%v), want %s", typ, lcid, ev.Entity(), got, err, ReasonInvalidID)
			} else if !strings.Contains(err.Error(), "sku:") {
				t.Errorf("%s with lcid %q: the reason does not say what is wrong: %v", typ, lcid, err)
			}
		}
	}
	// Only the prefix is reserved: these are orders' lcids.
	for _, lcid := range []string{"SKU:SKU-B", "sku", "skus:1", "LC-sku:1", " sku:1", "ｓｋｕ:1"} {
		for _, typ := range orderTypes {
			ev, err := Decode([]byte(sampleBodies(lcid)[typ]), 0)
			if err != nil || ev.Entity() != lcid {
				t.Errorf("%s with lcid %q: entity %q, %v", typ, lcid, ev.Entity(), err)
			}
		}
	}
	ev, err := Decode([]byte(sampleBodies("sku:SKU-B")[event.Drain]), 0)
	if err != nil || ev.Entity() != "sku:SKU-B" || ev.DrainOf() != "sku:SKU-B" {
		t.Fatalf("drain of sku:SKU-B: entity %q, %v", ev.Entity(), err)
	}
}

// skuOf reports whether typ is an inventory event's (its sample decodes to one with a SKU).
func skuOf(t *testing.T, typ event.Type) (string, bool) {
	t.Helper()
	ev, err := Decode([]byte(sampleBodies("LC-1")[typ]), 0)
	if err != nil {
		t.Fatalf("sample of %s: %v", typ, err)
	}
	return ev.InventorySKU()
}

// TestOnlyOrderEventsLookForALostOrder: a turn with no state in Redis looks for the order
// in PostgreSQL only for an event about an existing order, never for a SKU's events (their
// entity, "sku:<sku>", has no order row: the lookup would query orders for nothing on every
// first event of a SKU). The guard this replaced named only inventory.received and
// inventory.adjusted, and failed here for every other warehouse event.
func TestOnlyOrderEventsLookForALostOrder(t *testing.T) {
	for typ, body := range sampleBodies("LC-1") {
		ev, err := Decode([]byte(body), 0)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		// By the wire contract's names: the warehouse's events are inventory.*.
		want := typ != event.OrderPlaced && !strings.HasPrefix(string(typ), "inventory.")
		if got := ev.AboutExistingOrder(); got != want {
			t.Errorf("%s (entity %q): AboutExistingOrder %v, want %v", typ, ev.Entity(), got, want)
		}
	}
}

// BenchmarkDecode is the cost of decoding a typical order.placed (three lines): what a
// turn pays to decode its envelope again rather than take the consumer's decoded event.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"event_id":"evt-000123","type":"order.placed","lcid":"LC-000123","occurred_at":"2026-12-01T10:00:00Z",` +
		`"data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"SKU-0001","qty":2},` +
		`{"line_id":"2","sku":"SKU-0002","qty":1},{"line_id":"3","sku":"SKU-0003","qty":4}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(body, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeRefusesWhatSQSCannotCarry: a string anywhere in an event (a reason, a best
// before) that holds U+FFFE or U+FFFF, raw or as a JSON escape, would come back raw in
// the event's result, which SQS refuses for ever; an escaped backslash before "uffff" is
// text. Failed before the check: the events below decoded.
func TestDecodeRefusesWhatSQSCannotCarry(t *testing.T) {
	held := func(reason string) string {
		return `{"event_id":"e1","type":"inventory.held","data":{"sku":"S","lot_id":"L","qty":1,"reason":"` + reason + `"}}`
	}
	for name, body := range map[string]string{
		"escaped U+FFFF":       held(`count \uffff`),
		"escaped U+FFFE":       held(`count \uFFFE`),
		"raw U+FFFF":           held("count \uffff"),
		"after a backslash":    held(`a\\\uffff`),
		"in an unknown field":  `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","note":"\uffff"}`,
		"in occurred_at's way": `{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1","data":{"x":"\uFfFf"}}`,
	} {
		_, err := Decode([]byte(body), 0)
		if got := InvalidReason(err); got != ReasonUncarriable {
			t.Errorf("%s: reason %q (%v), want %s", name, got, err, ReasonUncarriable)
		}
	}
	for name, body := range map[string]string{
		"an escaped backslash": held(`a\\uffff`),
		"U+FFFD":               held(`\ufffd`),
		"other escapes":        held(`\u00e9\ud83d\ude00`),
	} {
		if _, err := Decode([]byte(body), 0); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
	}
}
