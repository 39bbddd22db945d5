package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
)

// target is one type the order-worker decodes, with the decoder it uses and encoding/json's
// way of decoding it.
type target struct {
	name   string
	new    func() any
	strict bool
}

func jsonTargets() []target {
	ts := []target{
		{"event", func() any { return new(event.Order) }, false},
		{"members", func() any { return new(map[string]json.RawMessage) }, false},
		{"state", func() any { return new(State) }, false},
		{"result", func() any { return new(event.Result) }, false},
	}
	for _, k := range Kinds() {
		if k.newData != nil {
			ts = append(ts, target{"data of " + string(k.Type), k.newData, true})
		}
	}
	return ts
}

func stdUnmarshal(data []byte, v any, strict bool) error {
	if !strict {
		return json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return noTrailingData(dec.Decode)
}

// unmarshalStrict refuses whatever follows the value but white space, a stray closing
// bracket included. Seen failing with the test Decoder.More makes (it accepted "{} }").
func TestUnmarshalStrictRefusesTrailingData(t *testing.T) {
	for _, s := range []string{`{} }`, `{}]`, `{} x`, `{} {}`, `{},`} {
		if err := unmarshalStrict([]byte(s), new(event.OrderData)); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if err := unmarshalStrict([]byte(" {} \n"), new(event.OrderData)); err != nil {
		t.Errorf("a value between white space refused: %v", err)
	}
}

// go-json, as unmarshal and unmarshalStrict use it, decodes what encoding/json decodes to
// the same value, and refuses what it refuses, for every type the order-worker decodes:
// an event's envelope and members, each kind's data (strictly), a turn's state and a
// result; and Marshal encodes each value decoded to the bytes encoding/json gives. The
// seeds hold the inputs where the two are known to differ when used carelessly: invalid
// UTF-8 and lone surrogates, names in another case, duplicate names, numbers beyond
// int64 or with a fraction, trailing data, deep nesting.
func FuzzJSONAsEncodingJSON(f *testing.F) {
	for _, lcid := range []string{"LC-1", "sku:SKU-B"} {
		for _, body := range sampleBodies(lcid) {
			f.Add([]byte(body))
			var o event.Order
			if json.Unmarshal([]byte(body), &o) == nil && len(o.Data) > 0 {
				f.Add([]byte(o.Data))
			}
		}
	}
	holdUntil := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	state, _ := json.Marshal(State{Seq: 3, Parked: []Parked{{Body: json.RawMessage(`{"event_id":"p1"}`)}},
		Requeued: map[string]int{"e1": 2}, Order: &event.OrderSnapshot{LCID: "LC-1", Status: "reserved", HoldUntil: &holdUntil}})
	f.Add(state)
	f.Add(sampleResult())
	for _, s := range []string{
		``, ` `, `{`, `}`, `null`, `[]`, `{} {}`, `{}x`, `{} `, `{} }`, `{}]`, "\xef\xbb\xbf{}",
		`{"event_id":"a","EVENT_ID":"b","Event_Id":"c"}`, `{"event_id":"a","event_id":"b"}`,
		"{\"event_id\":\"\xff\xfe\"}", `{"event_id":"\ud800"}`, `{"event_id":"\ud83d\ude00\u0000"}`,
		`{"qty":1e2}`, `{"qty":1.5}`, `{"qty":-0}`, `{"qty":9223372036854775808}`, `{"qty":"1"}`,
		`{"lines":[{"line_id":"1","sku":"S","qty":1,"x":1}]}`, `{"lines":null}`, `{"mode":null}`,
		`{"occurred_at":"2026-13-01T00:00:00Z"}`, `{"occurred_at":null}`, `{"queued_at":"2026-12-01T00:00:00Z"}`,
		`{"data":[1,{"a":` + "\"\\u00e9\"" + `}]}`, `{"a":` + string(slices.Repeat([]byte("["), 200)) + string(slices.Repeat([]byte("]"), 200)) + `}`,
		`{"seq":1,"order":{"lines":[{"line_id":"1"}]},"requeued":{"e":1.0}}`,
		`{"detail":"<a&b>\u2028\u2029"}`, `{"processed_at":"2026-12-01T09:00:00.123456789+09:00"}`, `{"parked":[{"body":{"a" : [1, 2]}}]}`,
		`{"requeued":{"e9":1,"e1":2,"e5":3,"e3":4,"e7":5,"e2":6}}`, `{"hold_for":"1h"}`, `{"sku":"S","lot_id":"L","qty":1,"reason":"r","extra":{}}`,
	} {
		f.Add([]byte(s))
	}
	targets := jsonTargets()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tg := range targets {
			got, want := tg.new(), tg.new()
			var errGot error
			if tg.strict {
				errGot = unmarshalStrict(data, got)
			} else {
				errGot = unmarshal(data, got)
			}
			errWant := stdUnmarshal(data, want, tg.strict)
			if (errGot == nil) != (errWant == nil) {
				t.Fatalf("%s of %q: go-json says %v, encoding/json %v", tg.name, data, errGot, errWant)
			}
			if errGot != nil {
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s of %q: go-json decodes %#v, encoding/json %#v", tg.name, data, got, want)
			}
			gotOut, errGot := Marshal(got)
			wantOut, errWant := json.Marshal(want)
			if (errGot == nil) != (errWant == nil) || !bytes.Equal(gotOut, wantOut) {
				t.Fatalf("%s of %q: go-json encodes %q (%v), encoding/json %q (%v)", tg.name, data, gotOut, errGot, wantOut, errWant)
			}
		}
	})
}

// sampleResult is a result as a step of an order.placed encodes it: an order of two lines
// and the moves and lots of its SKU.
func sampleResult() []byte {
	hold := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	lots := []event.LotQty{{LotID: "L-1", Qty: 2}, {LotID: "L-2", Qty: 1}}
	out, err := json.Marshal(event.Result{EventID: "LC-000123-e01", Entity: "LC-000123", LCID: "LC-000123", Seq: 4, Arrival: 4,
		Type: event.OrderPlaced, Outcome: event.Applied, ProcessedAt: time.Date(2026, 12, 1, 8, 0, 0, 123456789, time.UTC),
		Order: &event.OrderSnapshot{LCID: "LC-000123", Status: event.StatusPlaced, Mode: event.ModeReserve, HoldUntil: &hold,
			Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-1", Qty: 3, Lots: lots}, {LineID: "2", SKU: "SKU-2", Qty: 1, Lots: lots[:1]}}},
		Moves: []event.Move{{OpID: "op-1", SKU: "SKU-1", LotID: "L-1", From: "sellable", To: "reserved", Qty: 2, Version: 7},
			{OpID: "op-1", Index: 1, SKU: "SKU-1", LotID: "L-2", From: "sellable", To: "reserved", Qty: 1, Version: 7}},
		SKUs: []event.SKU{{SKU: "SKU-1", SafetyStock: 2, Version: 7, Lots: []event.Lot{
			{LotID: "L-1", Kind: "on_hand", Good: true, BestBefore: "2027-01-01", ValidFrom: "2026-11-01", ValidTo: "2027-01-01", Sellable: 40, Reserved: 2},
			{LotID: "L-2", Kind: "on_hand", Good: true, BestBefore: "2027-02-01", ValidFrom: "2026-11-01", ValidTo: "2027-02-01", Sellable: 9, Reserved: 1}}}},
	})
	if err != nil {
		panic(err)
	}
	return out
}

// BenchmarkEncodeStep encodes what a step commits, a state and a result, with go-json
// (Marshal) and, for the baseline, with encoding/json.
func BenchmarkEncodeStep(b *testing.B) {
	var st State
	var r event.Result
	holdUntil := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	raw, _ := json.Marshal(State{Seq: 3, Order: &event.OrderSnapshot{LCID: "LC-1", Status: "placed", HoldUntil: &holdUntil,
		Lines: []event.SnapshotLine{{LineID: "1", SKU: "SKU-1", Qty: 3, Lots: []event.LotQty{{LotID: "L-1", Qty: 3}}}}}})
	if err := errors.Join(json.Unmarshal(raw, &st), json.Unmarshal(sampleResult(), &r)); err != nil {
		b.Fatal(err)
	}
	encode := func(b *testing.B, marshal func(any) ([]byte, error)) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshal(st); err != nil {
				b.Fatal(err)
			}
			if _, err := marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("encoding-json", func(b *testing.B) { encode(b, json.Marshal) })
	b.Run("go-json", func(b *testing.B) { encode(b, Marshal) })
}

// BenchmarkDecodeEvent decodes an order.placed of two lines as the order-worker does on
// receipt (its envelope's members, then the event and its data strictly), with go-json
// and, for the baseline, with encoding/json.
func BenchmarkDecodeEvent(b *testing.B) {
	body := []byte(sampleBodies("LC-000123")[event.OrderPlaced])
	decode := func(b *testing.B, un func([]byte, any, bool) error) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]json.RawMessage
			var o event.Order
			var d event.OrderData
			if err := errors.Join(un(body, &m, false), un(body, &o, false), un(o.Data, &d, true)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("go-json", func(b *testing.B) {
		decode(b, func(data []byte, v any, strict bool) error {
			if strict {
				return unmarshalStrict(data, v)
			}
			return unmarshal(data, v)
		})
	})
	b.Run("encoding-json", func(b *testing.B) { decode(b, stdUnmarshal) })
}
