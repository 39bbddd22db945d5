package persist_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/testenv/resultgen"
)

// DecodeResult gives the struct encoding/json gives, for every result of the stream of
// the benchmark and the tests.
func TestDecodeResultAsEncodingJSON(t *testing.T) {
	rs := resultgen.New(resultgen.Config{Seed: 7, SKUs: 20, LotsPerSKU: 3, Active: 30}).Results(3000)
	for i, r := range rs {
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var want, got event.Result
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatal(err)
		}
		if err := persist.DecodeResult(body, &got); err != nil {
			t.Fatalf("result %d: %v\n%s", i, err, body)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("result %d:\n got %+v\nwant %+v\nfrom %s", i, got, want, body)
		}
	}
}

// DecodeResult refuses what encoding/json refuses, and accepts the rest with the same
// values: unknown fields, keys in another case, duplicate keys, escapes, null.
func TestDecodeResultEdgeCases(t *testing.T) {
	for _, body := range []string{
		// refused
		``,
		` `,
		`{`,
		`{"event_id":"e1"`,
		`{"event_id":"e1"}}`,
		`{"event_id":"e1"} x`,
		`{"event_id":"e1",}`,
		`{'event_id':"e1"}`,
		`[]`,
		`"e1"`,
		`12`,
		`true`,
		`{"event_id":e1}`,
		`{"event_id":12}`,
		`{"seq":"1"}`,
		`{"seq":1.5}`,
		`{"seq":1e3}`,
		`{"seq":99999999999999999999}`,
		`{"seq":-}`,
		`{"seq":01}`,
		`{"seq":true}`,
		`{"order":[]}`,
		`{"order":{"paid":"yes"}}`,
		`{"order":{"lines":{}}}`,
		`{"order":{"lines":[{"qty":"2"}]}}`,
		`{"moves":{}}`,
		`{"moves":[{"index":"0"}]}`,
		`{"skus":[{"lots":[{"sellable":1.5}]}]}`,
		`{"processed_at":"2026-11-29"}`,
		`{"processed_at":"yesterday"}`,
		`{"processed_at":""}`,
		`{"processed_at":12}`,
		`{"event_id":"\x"}`,
		`{"event_id":"\u12"}`,
		"{\"event_id\":\"a\tb\"}",
		// accepted
		`{}`,
		`null`,
		` {"event_id" : "e1" } `,
		`{"event_id":"e1","unknown":{"a":[1,2,{"b":null}]},"extra":1.5e300}`,
		`{"EVENT_ID":"e1","Seq":3,"ProcessedAt":"2026-11-29T14:13:28.762Z"}`,
		`{"event_id":"e1","event_id":"e2"}`,
		`{"event_id":null,"seq":null,"order":null,"moves":null,"skus":null,"processed_at":null}`,
		`{"event_id":"\u00e9\ud83d\ude00\"\\\/\n","reason":"\ud800"}`,
		"{\"event_id\":\"\xff\xfe\"}",
		`{"seq":-9223372036854775808,"arrival":9223372036854775807}`,
		`{"processed_at":"2026-11-29T14:13:28.762123456+09:00"}`,
		`{"order":{"lcid":"L1","lines":[]},"moves":[],"skus":[{"sku":"S","lots":[]}]}`,
		`{"order":{"lcid":"L1","lines":[{"line_id":"1","sku":"S","qty":2,"lots":[{"lot_id":"L00","qty":2}]}]}}`,
	} {
		var want, got event.Result
		wantErr := json.Unmarshal([]byte(body), &want)
		err := persist.DecodeResult([]byte(body), &got)
		switch {
		case (err == nil) != (wantErr == nil):
			t.Errorf("%q: error %v, encoding/json's %v", body, err, wantErr)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Errorf("%q:\n got %+v\nwant %+v", body, got, want)
		}
	}
}

// BenchmarkDecodeResult decodes the stream of junbanlab bench persist with DecodeResult
// and, for comparison, with encoding/json.
func BenchmarkDecodeResult(b *testing.B) {
	rs := resultgen.New(resultgen.Config{Seed: 1, SKUs: 200, LotsPerSKU: 3, Active: 500, Prefix: "bench_persist_0123abcd-"}).Results(2000)
	bodies := make([][]byte, len(rs))
	for i, r := range rs {
		var err error
		if bodies[i], err = json.Marshal(r); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name   string
		decode func([]byte, *event.Result) error
	}{
		{"DecodeResult", persist.DecodeResult},
		{"encoding_json", func(body []byte, r *event.Result) error { return json.Unmarshal(body, r) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var r event.Result
				if err := bc.decode(bodies[i%len(bodies)], &r); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
