package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
)

// placedJSON is a valid order.placed as a shop sends it.
const placedJSON = `{"event_id":"evt-7f3a","type":"order.placed","lcid":"ord-1001","occurred_at":"2026-12-01T09:30:00Z",` +
	`"data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"SKU-0001","qty":2}]}}`

const topicARN = "arn:aws:sns:ap-northeast-1:123456789012:shop-orders"

// snsOf is an SNS notification as SNS delivers it to a queue subscribed without raw
// message delivery, with message as its Message; edit changes its members (nil deletes one).
func snsOf(message any, edit map[string]any) string {
	n := map[string]any{
		"Type":             "Notification",
		"MessageId":        "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn":         topicARN,
		"Subject":          "order.placed",
		"Message":          message,
		"Timestamp":        "2026-12-01T09:30:00.123Z",
		"SignatureVersion": "1",
		"Signature":        "EXAMPLEpH+DcEwjAPg8O9mY8dReBSwksfg2S7WKQcikcNKWLQjwu6A4VbeS0QHVCkhRS7fUQvi2egU3N858fiTDN6bkkOxYDVrY0Ad8L10Hs3zH81mtnPk5uvvolIC1CXGu43obcgFxeL3khZl8IKvO61GWB6jI9b5+gLPoBc1Q=",
		"SigningCertURL":   "https://sns.ap-northeast-1.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem",
		"UnsubscribeURL":   "https://sns.ap-northeast-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + topicARN + ":6e3b2a1c",
		"MessageAttributes": map[string]any{
			"traceparent": map[string]string{"Type": "String", "Value": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		},
	}
	return marshalEdited(n, edit)
}

// ebOf is an EventBridge event as a rule delivers it to a queue (no input transformer),
// with detail as its detail.
func ebOf(detail any, edit map[string]any) string {
	e := map[string]any{
		"version":     "0",
		"id":          "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
		"detail-type": "order.placed",
		"source":      "shop.checkout",
		"account":     "123456789012",
		"time":        "2026-12-01T09:30:00Z",
		"region":      "ap-northeast-1",
		"resources":   []string{},
		"detail":      detail,
	}
	return marshalEdited(e, edit)
}

func marshalEdited(m, edit map[string]any) string {
	for k, v := range edit {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }

// unwrapAndDecode is the order-worker's decode of a message: Unwrap, then DecodeLimits of the
// event inside.
func unwrapAndDecode(body string) (domain.Event, []byte, domain.Envelope, error) {
	inner, env, err := domain.Unwrap([]byte(body), 0)
	if err != nil {
		return domain.Event{}, nil, env, err
	}
	ev, err := domain.DecodeLimits(inner, domain.Limits{})
	return ev, inner, env, err
}

func TestUnwrapFindsTheEventInEachEnvelope(t *testing.T) {
	cases := []struct {
		name, body string
		kind       domain.EnvelopeKind
		want       domain.Envelope
	}{
		{"raw", placedJSON, domain.EnvelopeRaw, domain.Envelope{Kind: domain.EnvelopeRaw}},
		{"raw drain", `{"event_id":"drain_1","type":"junban.drain","lcid":"sku:SKU-0001"}`, domain.EnvelopeRaw, domain.Envelope{Kind: domain.EnvelopeRaw}},
		// Decode matches member names without regard to case; such a body applied before
		// envelopes, and still does.
		{"raw, names in capitals", `{"EVENT_ID":"e1","Type":"payment.confirmed","LCID":"ord-1001"}`, domain.EnvelopeRaw, domain.Envelope{Kind: domain.EnvelopeRaw}},
		{"sns", snsOf(placedJSON, nil), domain.EnvelopeSNS, domain.Envelope{
			Kind: domain.EnvelopeSNS, ID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", TopicArn: topicARN, Subject: "order.placed",
			Attributes: map[string]domain.SNSAttribute{"traceparent": {Type: "String", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
		}},
		{"sns without subject or attributes", snsOf(placedJSON, map[string]any{"Subject": nil, "MessageAttributes": nil}), domain.EnvelopeSNS, domain.Envelope{
			Kind: domain.EnvelopeSNS, ID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", TopicArn: topicARN,
		}},
		{"sns, message indented", snsOf("{\n  \"event_id\": \"evt-7f3a\",\n  \"type\": \"payment.confirmed\",\n  \"lcid\": \"ord-1001\"\n}\n", map[string]any{"MessageAttributes": nil, "Subject": nil}), domain.EnvelopeSNS, domain.Envelope{
			Kind: domain.EnvelopeSNS, ID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", TopicArn: topicARN,
		}},
		{"eventbridge", ebOf(rawJSON(placedJSON), nil), domain.EnvelopeEventBridge, domain.Envelope{
			Kind: domain.EnvelopeEventBridge, ID: "6a7e8feb-b491-4cf7-a9f1-bf3703467718", Source: "shop.checkout", DetailType: "order.placed", Time: "2026-12-01T09:30:00Z",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, inner, env, err := unwrapAndDecode(c.body)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if env.Kind != c.kind || jsonString(t, env) != jsonString(t, c.want) {
				t.Fatalf("envelope %s, want %s", jsonString(t, env), jsonString(t, c.want))
			}
			if c.kind == domain.EnvelopeRaw && string(inner) != c.body {
				t.Fatalf("a raw event came back changed: %s", inner)
			}
			// The event inside is what the turn stores: a junban event, which applies as it
			// would have sent raw.
			raw, err := domain.Decode(inner, 0)
			if err != nil {
				t.Fatalf("the event inside does not decode raw: %v", err)
			}
			if raw.EventID != ev.EventID || raw.Type != ev.Type || raw.Entity() != ev.Entity() {
				t.Fatalf("decoded %+v, raw %+v", ev.Order, raw.Order)
			}
			if back, again, err := domain.Unwrap(inner, 0); err != nil || again.Kind != domain.EnvelopeRaw || !bytes.Equal(back, inner) {
				t.Fatalf("the event inside is not a raw event: %s %v", again.Kind, err)
			}
		})
	}
}

func TestUnwrapRefusesWithAReason(t *testing.T) {
	confirmation := func(typ string) string {
		return marshalEdited(map[string]any{
			"Type": typ, "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b", "Token": "2336412f37",
			"TopicArn": topicARN, "Message": "You have chosen to subscribe to the topic " + topicARN + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
			"SubscribeURL": "https://sns.ap-northeast-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + topicARN + "&Token=2336412f37",
			"Timestamp":    "2026-12-01T09:00:00.000Z", "SignatureVersion": "1", "Signature": "EXAMPLE", "SigningCertURL": "https://sns.ap-northeast-1.amazonaws.com/x.pem",
		}, nil)
	}
	over := snsOf(placedJSON, map[string]any{"MessageAttributes": map[string]any{
		"pad": map[string]string{"Type": "String", "Value": strings.Repeat("p", domain.MaxEventBytes)},
	}})
	cases := []struct {
		name, body, reason string
		// detail is a part of the error's text: what an operator reads in the DLQ.
		detail string
		// kind is the envelope recognised: a refusal is logged with its ids.
		kind domain.EnvelopeKind
	}{
		{"not JSON", `order.placed evt-7f3a`, domain.ReasonMalformedJSON, "", domain.EnvelopeUnknown},
		{"truncated", `{"event_id":`, domain.ReasonMalformedJSON, "", domain.EnvelopeUnknown},
		{"not an object", `[1,2]`, domain.ReasonMalformedJSON, "not a JSON object", domain.EnvelopeUnknown},
		{"null", `null`, domain.ReasonMalformedJSON, "not a JSON object", domain.EnvelopeUnknown},
		{"trailing data", placedJSON + ` {}`, domain.ReasonMalformedJSON, "", domain.EnvelopeUnknown},
		{"empty object", `{}`, domain.ReasonUnknownEnvelope, "", domain.EnvelopeUnknown},
		{"some other object", `{"order":{"id":"ord-1001"},"kind":"placed"}`, domain.ReasonUnknownEnvelope, "", domain.EnvelopeUnknown},
		{"too large", over, domain.ReasonTooLarge, "", domain.EnvelopeUnknown},

		{"sns subscription confirmation", confirmation("SubscriptionConfirmation"), domain.ReasonSNSConfirmation, "SubscriptionConfirmation", domain.EnvelopeSNS},
		{"sns unsubscribe confirmation", confirmation("UnsubscribeConfirmation"), domain.ReasonSNSConfirmation, "UnsubscribeConfirmation", domain.EnvelopeSNS},
		{"sns of another type", snsOf(placedJSON, map[string]any{"Type": "Announcement"}), domain.ReasonUnknownEnvelope, "Announcement", domain.EnvelopeSNS},
		{"sns message not JSON", snsOf("order placed: ord-1001", nil), domain.ReasonMalformedJSON, "SNS Message", domain.EnvelopeSNS},
		{"sns message an array", snsOf(`[`+placedJSON+`]`, nil), domain.ReasonMalformedJSON, "SNS Message is not a JSON object", domain.EnvelopeSNS},
		{"sns message an object, not a string", snsOf(rawJSON(placedJSON), nil), domain.ReasonMalformedJSON, "SNS Message is not a string", domain.EnvelopeSNS},
		{"sns subject and attributes only", snsOf(nil, map[string]any{"Message": nil}), domain.ReasonMissingField, "no Message", domain.EnvelopeSNS},
		{"sns empty message", snsOf("", nil), domain.ReasonMissingField, "no Message", domain.EnvelopeSNS},
		{"sns without MessageId", snsOf(placedJSON, map[string]any{"MessageId": nil}), domain.ReasonMissingField, "MessageId", domain.EnvelopeSNS},
		{"sns attributes malformed", snsOf(placedJSON, map[string]any{"MessageAttributes": map[string]any{"traceparent": "00-4bf9"}}), domain.ReasonMalformedJSON, "MessageAttributes", domain.EnvelopeSNS},
		{"sns in sns", snsOf(snsOf(placedJSON, nil), nil), domain.ReasonNestedEnvelope, "SNS Message is itself an SNS envelope", domain.EnvelopeSNS},
		{"eventbridge in sns", snsOf(ebOf(rawJSON(placedJSON), nil), nil), domain.ReasonNestedEnvelope, "SNS Message is itself an EventBridge envelope", domain.EnvelopeSNS},

		{"eventbridge in eventbridge", ebOf(rawJSON(ebOf(rawJSON(placedJSON), nil)), nil), domain.ReasonNestedEnvelope, "EventBridge detail is itself an EventBridge envelope", domain.EnvelopeEventBridge},
		{"sns in eventbridge", ebOf(rawJSON(snsOf(placedJSON, nil)), nil), domain.ReasonNestedEnvelope, "EventBridge detail is itself an SNS envelope", domain.EnvelopeEventBridge},
		{"eventbridge without detail", ebOf(nil, map[string]any{"detail": nil}), domain.ReasonMissingField, "detail", domain.EnvelopeEventBridge},
		{"eventbridge detail a string", ebOf(placedJSON, nil), domain.ReasonMalformedJSON, "EventBridge detail is not a JSON object", domain.EnvelopeEventBridge},
		{"eventbridge detail-type not the type", ebOf(rawJSON(placedJSON), map[string]any{"detail-type": "Order Placed"}), domain.ReasonDetailTypeMismatch, `"Order Placed"`, domain.EnvelopeEventBridge},
		{"eventbridge empty detail-type", ebOf(rawJSON(placedJSON), map[string]any{"detail-type": ""}), domain.ReasonMissingField, "detail-type", domain.EnvelopeEventBridge},
		{"eventbridge detail-type not a string", ebOf(rawJSON(placedJSON), map[string]any{"detail-type": 7}), domain.ReasonMalformedJSON, "detail-type", domain.EnvelopeEventBridge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, env, err := unwrapAndDecode(c.body)
			if got := domain.InvalidReason(err); got != c.reason {
				t.Fatalf("reason %q (%v), want %s", got, err, c.reason)
			}
			if !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("%v: does not say %q", err, c.detail)
			}
			if env.Kind != c.kind {
				t.Fatalf("envelope %s, want %s", env.Kind, c.kind)
			}
			if (env.Kind == domain.EnvelopeSNS && env.TopicArn != topicARN) || (env.Kind == domain.EnvelopeEventBridge && env.Source != "shop.checkout") {
				t.Fatalf("refused without the envelope's ids: %+v", env)
			}
		})
	}
}

// An event inside an envelope that Decode refuses is refused with Decode's own reason, as
// if it had come raw: the envelope is well-formed, its event is not.
func TestUnwrapLeavesABadEventToDecode(t *testing.T) {
	bad := []struct {
		name, inner string
		// detailType is the EventBridge envelope's: the event's type, where it has one.
		detailType string
	}{
		{"no event_id", `{"type":"payment.confirmed","lcid":"ord-1001"}`, "payment.confirmed"},
		{"not a junban event", `{"order":"ord-1001"}`, "order.placed"},
		{"zero quantity", `{"event_id":"e1","type":"order.placed","lcid":"ord-1001","data":{"mode":"ship","target_date":"2026-12-03","lines":[{"line_id":"1","sku":"S","qty":0}]}}`, "order.placed"},
		{"unknown type", `{"event_id":"e1","type":"order.placed_twice","lcid":"ord-1001"}`, "order.placed_twice"},
		{"no type", `{"event_id":"e1","lcid":"ord-1001"}`, "payment.confirmed"},
		{"brace in the lcid", `{"event_id":"e1","type":"payment.confirmed","lcid":"{ord}"}`, "payment.confirmed"},
	}
	for _, c := range bad {
		_, rawErr := domain.Decode([]byte(c.inner), 0)
		if rawErr == nil {
			t.Fatalf("%s: Decode accepts %s", c.name, c.inner)
		}
		for _, body := range []string{snsOf(c.inner, nil), ebOf(rawJSON(c.inner), map[string]any{"detail-type": c.detailType})} {
			_, _, env, err := unwrapAndDecode(body)
			if err == nil || err.Error() != rawErr.Error() {
				t.Errorf("%s in %s: %v, want Decode's %v", c.name, env.Kind, err, rawErr)
			}
		}
	}
}

// The size bound is the message's as SQS gives it: an SNS notification of MaxEventBytes
// whose event is valid applies; one byte more is refused.
func TestUnwrapBoundsTheMessageNotTheEvent(t *testing.T) {
	at := snsOf(placedJSON, map[string]any{"MessageAttributes": map[string]any{"pad": map[string]string{"Type": "String", "Value": ""}}})
	pad := strings.Repeat("p", domain.MaxEventBytes-len(at))
	at = snsOf(placedJSON, map[string]any{"MessageAttributes": map[string]any{"pad": map[string]string{"Type": "String", "Value": pad}}})
	if len(at) != domain.MaxEventBytes {
		t.Fatalf("the notification is %d bytes, want %d", len(at), domain.MaxEventBytes)
	}
	ev, inner, _, err := unwrapAndDecode(at)
	if err != nil || ev.EventID != "evt-7f3a" || string(inner) != placedJSON {
		t.Fatalf("a %d-byte notification: %v", len(at), err)
	}
	over := snsOf(placedJSON, map[string]any{"MessageAttributes": map[string]any{"pad": map[string]string{"Type": "String", "Value": pad + "p"}}})
	if _, _, _, err := unwrapAndDecode(over); domain.InvalidReason(err) != domain.ReasonTooLarge {
		t.Fatalf("a %d-byte notification: %v, want %s", len(over), err, domain.ReasonTooLarge)
	}
	// The order-worker's own bound, when it sets one, is the message's too.
	if _, _, err := domain.Unwrap([]byte(snsOf(placedJSON, nil)), len(placedJSON)+1); domain.InvalidReason(err) != domain.ReasonTooLarge {
		t.Fatalf("a notification over the worker's bound: %v", err)
	}
}

// TestLoggedEnvelopeIsBounded: a log line quotes an envelope's sender-written fields up
// to the longest AWS writes; a longer one is cut at a character's start and says how long
// it was; AWS's own values are left whole.
func TestLoggedEnvelopeIsBounded(t *testing.T) {
	arn := "arn:aws:sns:ap-northeast-1:123456789012:" + strings.Repeat("t", 256)
	whole := domain.Envelope{Kind: domain.EnvelopeSNS, ID: "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", TopicArn: arn}
	if got := whole.Logged(); !reflect.DeepEqual(got, whole) {
		t.Errorf("AWS's own values changed: %+v", got)
	}
	long := domain.Envelope{Kind: domain.EnvelopeEventBridge, ID: strings.Repeat("i", 70),
		Source: strings.Repeat("s", 255) + "é" + strings.Repeat("s", 10), DetailType: "order.placed\xff"}
	got := long.Logged()
	if want := strings.Repeat("i", domain.LogMaxEnvelopeID) + "... (cut from 70 bytes)"; got.ID != want {
		t.Errorf("id %q, want %q", got.ID, want)
	}
	if want := strings.Repeat("s", 255) + "... (cut from 267 bytes)"; got.Source != want {
		t.Errorf("source %q, want it cut before the é", got.Source)
	}
	if got.DetailType != "order.placed\uFFFD" {
		t.Errorf("detail-type %q, want the invalid byte replaced", got.DetailType)
	}
}

// FuzzUnwrap: Unwrap never panics; what it refuses it refuses with an *InvalidError and a
// reason; a raw event comes back as it is; and the event it finds in an envelope, when
// Decode takes it, is a raw event Unwrap and Decode would take the same if it came raw:
// an envelope lets through nothing a raw body could not bring.
func FuzzUnwrap(f *testing.F) {
	for _, s := range []string{
		placedJSON, `{}`, `[1,2]`, `null`, `{"event_id":`, `{"Type":"Notification"}`,
		snsOf(placedJSON, nil), snsOf(snsOf(placedJSON, nil), nil), snsOf(nil, map[string]any{"Message": nil}),
		snsOf(`{"type":"payment.confirmed","lcid":"L"}`, nil), snsOf("not json", nil),
		ebOf(rawJSON(placedJSON), nil), ebOf(rawJSON(placedJSON), map[string]any{"detail-type": "Order Placed"}),
		ebOf(rawJSON(`{"event_id":"e1","lcid":"L"}`), nil), ebOf(placedJSON, nil),
		snsOf(strings.Replace(placedJSON, "evt-7f3a", "evt~q1", 1), nil), strings.Replace(placedJSON, "ord-1001", `ord-\uffff`, 1),
		ebOf(rawJSON(strings.Replace(placedJSON, "SKU-0001", "SKU\uFFFE", 1)), map[string]any{"detail-type": "order.placed"}),
		`{"Type":"Notification","TopicArn":"t","MessageId":"m","Message":"{\"Type\":\"x\",\"TopicArn\":\"y\"}"}`,
		`{"detail-type":"payment.confirmed","source":"s","detail":{"event_id":"e","TYPE":"payment.confirmed","lcid":"L"}}`,
		snsOf(placedJSON, map[string]any{"TopicArn": strings.Repeat("é", 1000), "MessageId": "m\xff" + strings.Repeat("m", 80)}),
		ebOf(rawJSON(placedJSON), map[string]any{"source": strings.Repeat("s", 300), "detail-type": strings.Repeat("d", 300)}),
	} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, body []byte, maxBytes int) {
		if maxBytes < 0 || maxBytes > domain.MaxEventBytes {
			maxBytes = 0
		}
		inner, env, err := domain.Unwrap(body, maxBytes)
		logged := env.Logged()
		for _, f := range []struct {
			v   string
			max int
		}{{logged.ID, domain.LogMaxEnvelopeID}, {logged.TopicArn, domain.LogMaxTopicArn},
			{logged.Source, domain.LogMaxEventBridgeField}, {logged.DetailType, domain.LogMaxEventBridgeField}} {
			// A replaced invalid byte grows to 3; the mark adds its length.
			if len(f.v) > 3*f.max+len("... (cut from 262144 bytes)") || !utf8.ValidString(f.v) {
				t.Fatalf("a logged envelope field of %d bytes (bound %d): %.80q", len(f.v), f.max, f.v)
			}
		}
		if err != nil {
			var ie *domain.InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" || inner != nil {
				t.Fatalf("refused with %T %v and %d bytes", err, err, len(inner))
			}
			return
		}
		switch env.Kind {
		case domain.EnvelopeRaw:
			if !bytes.Equal(inner, body) {
				t.Fatalf("a raw event came back changed")
			}
		case domain.EnvelopeSNS, domain.EnvelopeEventBridge:
			if len(inner) >= len(body) {
				t.Fatalf("an event of %d bytes in an envelope of %d", len(inner), len(body))
			}
		default:
			t.Fatalf("accepted with envelope %q", env.Kind)
		}
		ev, err := domain.DecodeLimits(inner, domain.Limits{MaxBytes: maxBytes})
		if err != nil {
			return
		}
		again, raw, err := domain.Unwrap(inner, maxBytes)
		if err != nil || raw.Kind != domain.EnvelopeRaw || !bytes.Equal(again, inner) {
			t.Fatalf("the event found in %s, sent raw, is %s: %v", env.Kind, raw.Kind, err)
		}
		if env.Kind == domain.EnvelopeEventBridge && string(ev.Type) != env.DetailType {
			t.Fatalf("an EventBridge event of detail-type %q brought a %s", env.DetailType, ev.Type)
		}
		// No envelope brings an event under one of junban's own names, nor one whose
		// strings SQS and SNS could not carry in its result.
		if ev.Type != event.OrderReservationExpired && strings.Contains(ev.EventID, event.OwnMark) || strings.Contains(ev.LCID, event.OwnMark) {
			t.Fatalf("accepted %q of %q in junban's own namespace", ev.EventID, ev.LCID)
		}
		if b, err := json.Marshal(ev.Payload()); err != nil || !event.Carriable(string(b)) || !event.Carriable(ev.EventID+ev.LCID) {
			t.Fatalf("accepted an event whose result SQS cannot carry: %q %v", b, err)
		}
	})
}

// docs/events.md's examples of an SNS notification and an EventBridge event unwrap and
// decode, and its section names every reason of a refused envelope.
func TestEventsDocEnvelopes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Envelopes: SNS and EventBridge\n")
	if !ok {
		t.Fatal(`docs/events.md: no section "Envelopes: SNS and EventBridge"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(section, -1)
	want := []domain.EnvelopeKind{domain.EnvelopeSNS, domain.EnvelopeEventBridge}
	if len(blocks) != len(want) {
		t.Fatalf("%d examples in the section, want %d", len(blocks), len(want))
	}
	for i, b := range blocks {
		ev, _, env, err := unwrapAndDecode(b[1])
		if err != nil || env.Kind != want[i] || ev.Type != "order.placed" {
			t.Errorf("example %d: %s %s %v, want an order.placed in %s", i+1, env.Kind, ev.Type, err, want[i])
		}
	}
	for _, reason := range []string{domain.ReasonUnknownEnvelope, domain.ReasonNestedEnvelope, domain.ReasonSNSConfirmation, domain.ReasonDetailTypeMismatch} {
		if !strings.Contains(section, "`"+reason+"`") {
			t.Errorf("the section does not name %s", reason)
		}
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNoEnvelopeCarriesJunbansOwnNames: a sender's event that names itself as junban's
// own records do (a quarantine's "<id>~q1", a redrive's "<id>~1", an expiry's
// "~expiry:...") is refused in every envelope, before any turn. Failed before event.OwnMark
// was refused: each decoded.
func TestNoEnvelopeCarriesJunbansOwnNames(t *testing.T) {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, id := range []string{"E2~q1", "E2~q1.1", "G~1", event.ExpiryEventID("LC-1", time.Unix(1_796_036_400, 0))} {
		ev := `{"event_id":` + q(id) + `,"type":"order.reservation_extended","lcid":"LC-1","data":{"hold_for":"1h"}}`
		for name, body := range map[string]string{"raw": ev, "SNS": snsOf(ev, nil), "EventBridge": ebOf(rawJSON(ev), map[string]any{"detail-type": "order.reservation_extended"})} {
			_, _, _, err := unwrapAndDecode(body)
			if got := domain.InvalidReason(err); got != domain.ReasonInvalidID || !strings.Contains(err.Error(), "junban's own") {
				t.Errorf("%s in %s: %q (%v), want %s", id, name, got, err, domain.ReasonInvalidID)
			}
		}
	}
}
