package webhook

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/event"
)

func TestParseAndMap(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		kind   Kind
		id     string
		body   string
		order  event.Type
		ignore string
		err    bool
	}{
		{"stripe succeeded", KindStripe, "", `{"id":"evt_1","type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"id":"pi_1","amount":1200,"currency":"jpy","metadata":{"lcid":"LC-1"}}}}`, event.PaymentConfirmed, "", false},
		{"stripe full refund", KindStripe, "", `{"id":"evt_2","type":"charge.refunded","created":1795946400,"data":{"object":{"id":"ch_1","refunded":true,"metadata":{"lcid":"LC-1"}}}}`, event.OrderCancelled, "", false},
		{"stripe partial refund", KindStripe, "", `{"id":"evt_3","type":"charge.refunded","created":1795946400,"data":{"object":{"id":"ch_1","refunded":false,"metadata":{"lcid":"LC-1"}}}}`, "", IgnorePartialRefund, false},
		{"stripe failed", KindStripe, "", `{"id":"evt_4","type":"payment_intent.payment_failed","created":1795946400,"data":{"object":{}}}`, "", IgnorePaymentFailed, false},
		{"stripe other type", KindStripe, "", `{"id":"evt_5","type":"customer.created","created":1795946400,"data":{"object":{}}}`, "", IgnoreUnknownType, false},
		{"stripe no lcid", KindStripe, "", `{"id":"evt_6","type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"metadata":{}}}}`, "", "", true},
		{"stripe no id", KindStripe, "", `{"type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"metadata":{"lcid":"LC-1"}}}}`, "", "", true},
		{"stripe no data", KindStripe, "", `{"id":"evt_7","type":"payment_intent.succeeded","created":1795946400}`, "", "", true},
		{"stripe not json", KindStripe, "", `{"id":`, "", "", true},
		{"stripe trailing data", KindStripe, "", `{"id":"evt_1","type":"x","created":1,"data":{"object":{}}} {}`, "", "", true},
		{"standard succeeded", KindStandard, "msg_1", `{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1"}}`, event.PaymentConfirmed, "", false},
		{"standard refunded", KindStandard, "msg_2", `{"type":"payment.refunded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1"}}`, event.OrderCancelled, "", false},
		{"standard failed", KindStandard, "msg_3", `{"type":"payment.failed","timestamp":"2026-11-29T10:00:00Z","data":{}}`, "", IgnorePaymentFailed, false},
		{"standard no timestamp", KindStandard, "msg_4", `{"type":"payment.succeeded","data":{"lcid":"LC-1"}}`, "", "", true},
		{"standard bad timestamp", KindStandard, "msg_5", `{"type":"payment.succeeded","timestamp":"yesterday","data":{"lcid":"LC-1"}}`, "", "", true},
		{"standard no lcid", KindStandard, "msg_6", `{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{}}`, "", "", true},
		{"standard lcid with control char", KindStandard, "msg_7", `{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC\u0000"}}`, "", "", true},
		{"standard array", KindStandard, "msg_8", `[]`, "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := Parse(c.kind, c.id, []byte(c.body))
			if c.err {
				if !errors.Is(err, ErrInvalidPayload) {
					t.Fatalf("Parse: %v, want ErrInvalidPayload", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ev.OccurredAt.Equal(at) {
				t.Errorf("OccurredAt %v, want %v", ev.OccurredAt, at)
			}
			o, ignore := Map("p", c.kind, ev)
			if c.order == "" {
				if o != nil || ignore != c.ignore {
					t.Fatalf("Map: %+v %q, want ignored %q", o, ignore, c.ignore)
				}
				return
			}
			if o == nil || o.Type != c.order || o.LCID != "LC-1" || o.EventID != OrderEventID("p", ev.ID) || !o.OccurredAt.Equal(at) {
				t.Fatalf("Map: %+v %q", o, ignore)
			}
		})
	}
}

func TestOrderEventIDIsDeterministic(t *testing.T) {
	a, b := OrderEventID("stripe", "evt_1"), OrderEventID("stripe", "evt_1")
	if a != b || !strings.HasPrefix(a, "wh-") {
		t.Fatalf("%s %s", a, b)
	}
	for _, other := range []string{OrderEventID("acme", "evt_1"), OrderEventID("stripe", "evt_2"), OrderEventID("stripe:e", "vt_1")} {
		if other == a {
			t.Fatalf("collision: %s", other)
		}
	}
}

func TestPayloadHashIgnoresFormatting(t *testing.T) {
	a, err := Parse(KindStripe, "", []byte(`{"id":"evt_1","type":"x","created":5,"data":{"object":{"amount":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(KindStripe, "", []byte("{ \"data\":{\"object\":{\"amount\":1, \"extra\":true}},\n \"created\":5, \"type\":\"x\", \"id\":\"evt_1\", \"livemode\":false }"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := Parse(KindStripe, "", []byte(`{"id":"evt_1","type":"x","created":5,"data":{"object":{"amount":2}}}`))
	if a.PayloadHash() != b.PayloadHash() {
		t.Error("same facts, different hashes")
	}
	if a.PayloadHash() == c.PayloadHash() {
		t.Error("different amount, same hash")
	}
}

// FuzzParse: the payload parser never panics, every error is ErrInvalidPayload, and an
// accepted event survives Encode and Parse unchanged.
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"id":"evt_1","type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"id":"pi_1","amount":1200,"currency":"jpy","metadata":{"lcid":"LC-1"}}}}`,
		`{"id":"evt_2","type":"charge.refunded","created":1,"data":{"object":{"refunded":false,"metadata":{"lcid":"LC-1"}}}}`,
		`{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00.123+09:00","data":{"lcid":"LC-1","amount":5,"partial":true}}`,
		`{"type":"payment.failed","timestamp":"2026-11-29T10:00:00Z","data":{}}`,
		`{"id":"\ud800","type":"x","created":1,"data":{"object":null}}`,
		`{}`, `null`, `[`, `{"data":{"object":{"metadata":{"lcid":1}}}}`,
	}
	for _, s := range seeds {
		f.Add(true, "msg_1", []byte(s))
		f.Add(false, "msg_1", []byte(s))
	}
	f.Fuzz(func(t *testing.T, stripe bool, id string, body []byte) {
		kind := KindStandard
		if stripe {
			kind = KindStripe
		}
		ev, err := Parse(kind, id, body)
		if err != nil {
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("error %v is not ErrInvalidPayload", err)
			}
			return
		}
		again, err := Encode(kind, ev)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(kind, ev.ID, again)
		if err != nil {
			t.Fatalf("re-encoded event rejected: %v\n%s", err, again)
		}
		if !back.OccurredAt.Equal(ev.OccurredAt) {
			t.Fatalf("round trip changed the time: %v, %v", ev.OccurredAt, back.OccurredAt)
		}
		back.OccurredAt = ev.OccurredAt
		if !reflect.DeepEqual(back, ev) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, back)
		}
		if back.PayloadHash() != ev.PayloadHash() {
			t.Fatalf("round trip changed the hash:\n%+v\n%+v", ev, back)
		}
		Map("p", kind, ev)
	})
}

// FuzzSignedDelivery runs a delivery through the handler's checks before any Redis or SQS
// work: an event of any fields, encoded and signed by the provider, verifies; its body then
// parses back to the same event or is refused with ErrInvalidPayload (never a panic), and
// an accepted event maps without a panic. The body with one byte changed no longer
// verifies under the same headers.
func FuzzSignedDelivery(f *testing.F) {
	f.Add(true, "evt_1", "payment_intent.succeeded", "LC-1", "pi_1", int64(1200), "jpy", false, int64(1795946400), uint(7))
	f.Add(false, "msg_1", "payment.refunded", "LC-1", "", int64(0), "", true, int64(1795946400), uint(0))
	f.Add(true, "evt_{x}", "charge.refunded", "LC-\x00", "", int64(-5), "", false, int64(-1), uint(3))
	f.Add(false, "", "payment.succeeded", "", "", int64(1), "", false, int64(253402300800), uint(1))
	keys := map[Kind]Provider{
		KindStripe:   mustProvider(f, "stripe", KindStripe, testStripeSecret),
		KindStandard: mustProvider(f, "acme", KindStandard, testStandardSecret),
	}
	now := time.Unix(1795946400, 0)
	f.Fuzz(func(t *testing.T, stripe bool, id, typ, lcid, payment string, amount int64, currency string, partial bool, at int64, pos uint) {
		kind := KindStandard
		if stripe {
			kind = KindStripe
		}
		p := keys[kind]
		ev := ProviderEvent{ID: id, Type: typ, LCID: lcid, PaymentID: payment, Amount: amount, Currency: currency,
			PartialRefund: partial, OccurredAt: time.Unix(at, 0).UTC()}
		body, err := Encode(kind, ev)
		if err != nil {
			return // a time encoding/json cannot write
		}
		h, err := p.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := p.Verify(h, body, now, ToleranceDefault)
		if kind == KindStandard && (id == "" || len(id) > MaxIDLength) {
			if err == nil {
				t.Fatalf("webhook-id %q verified", id)
			}
			return
		}
		if err != nil {
			t.Fatalf("signed delivery refused: %v", err)
		}
		if _, err := p.Verify(h, tamper(body, pos, 0x01), now, ToleranceDefault); err == nil {
			t.Fatal("tampered body verified")
		}
		got, err := Parse(kind, signed.ID, body)
		if err != nil {
			if !errors.Is(err, ErrInvalidPayload) {
				t.Fatalf("error %v is not ErrInvalidPayload", err)
			}
			return
		}
		if got.ID != id || got.Type != typ || got.LCID != lcid || got.Amount != amount || !got.OccurredAt.Equal(ev.OccurredAt) {
			t.Fatalf("parsed %+v from a delivery of %+v", got, ev)
		}
		Map(p.Name, kind, got)
	})
}
