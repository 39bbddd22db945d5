package order

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
)

func TestDecodeRejectsBadInputWithAReason(t *testing.T) {
	placed := func(data string) string {
		return `{"event_id":"e1","type":"order.placed","lcid":"LC-1","data":` + data + `}`
	}
	cases := []struct {
		name, body, reason string
	}{
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
		{"adjust by zero", `{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","lot_id":"L","delta":0,"reason":"count"}}`, ReasonInvalidQuantity},
		{"receive without lot", `{"event_id":"e1","type":"inventory.received","data":{"sku":"S","best_before":"2027-01-01"}}`, ReasonMissingField},
		{"oversized", `{"event_id":"e1","type":"payment.confirmed","lcid":"` + strings.Repeat("x", MaxEventBytes) + `"}`, ReasonTooLarge},
	}
	for _, c := range cases {
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
	skuAt, skuOver := strings.Repeat("s", ledger.MaxIDLen), strings.Repeat("s", ledger.MaxIDLen+1)
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

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"event_id":"e1","type":"order.placed","lcid":"LC-1","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"S","qty":2}]}}`))
	f.Add([]byte(`{"event_id":"e1","type":"inventory.adjusted","data":{"sku":"S","lot_id":"L","delta":-1,"reason":"x"}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := Decode(body, 0)
		if err != nil {
			if InvalidReason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if ev.EventID == "" || ev.Entity() == "" {
			t.Fatalf("accepted an event without id or entity: %s", body)
		}
		if ev.Lines != nil {
			for _, l := range ev.Lines.Lines {
				if l.Qty <= 0 {
					t.Fatalf("accepted qty %d", l.Qty)
				}
			}
		}
	})
}

// The turn takes the caller's decoded event only for the caller's own envelope: it starts
// from the oldest backlog entry, which may be another event.
func TestDecodeInTakesTheCallersEventOnlyForEqualBytes(t *testing.T) {
	mine := []byte(`{"event_id":"e1","type":"payment.confirmed","lcid":"LC-1"}`)
	other := []byte(`{"event_id":"e0","type":"payment.confirmed","lcid":"LC-1"}`)
	decoded, err := Decode(mine, 0)
	if err != nil {
		t.Fatal(err)
	}
	decoded.EventID = "from-the-caller" // tells a hand-over from a decode
	ctx := WithDecoded(context.Background(), mine, decoded)

	got, err := decodeIn(ctx, other, MaxEventBytes)
	if err != nil || got.EventID != "e0" {
		t.Fatalf("backlog envelope: %q, %v; want e0 decoded from its own bytes", got.EventID, err)
	}
	got, err = decodeIn(ctx, append([]byte(nil), mine...), MaxEventBytes)
	if err != nil || got.EventID != "from-the-caller" {
		t.Fatalf("the caller's envelope (as Redis returned it): %q, %v; want the caller's event", got.EventID, err)
	}
	if got, err = decodeIn(ctx, mine, len(mine)-1); err == nil {
		t.Fatalf("an envelope over the processor's limit was taken: %q", got.EventID)
	}
	if got, err = decodeIn(context.Background(), mine, MaxEventBytes); err != nil || got.EventID != "e1" {
		t.Fatalf("without a hand-over: %q, %v; want e1", got.EventID, err)
	}
}

// manyLines is an order.placed of n lines on one SKU.
func manyLines(eventID, lcid string, n int) []byte {
	d := event.OrderData{Mode: ledger.ModeShip, TargetDate: "2026-12-01"}
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
