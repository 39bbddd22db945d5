package domain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/junban/junban/internal/event"
)

// EnvelopeKind names how a message on the orders queue carried its event. The values are
// those of the order-worker's metric label "envelope".
type EnvelopeKind string

// Envelope kinds.
const (
	// EnvelopeRaw: the message is a junban event as it is.
	EnvelopeRaw EnvelopeKind = "raw"
	// EnvelopeSNS: an SNS notification (a topic subscribed without raw message delivery);
	// its Message is the event.
	EnvelopeSNS EnvelopeKind = "sns"
	// EnvelopeEventBridge: an EventBridge event (a rule whose target is the queue, without
	// an input transformer); its detail is the event.
	EnvelopeEventBridge EnvelopeKind = "eventbridge"
	// EnvelopeUnknown: a message that is no JSON object, or one of no shape above; Unwrap
	// refuses it.
	EnvelopeUnknown EnvelopeKind = "unknown"
)

// EnvelopeKinds returns every kind, EnvelopeUnknown last.
func EnvelopeKinds() []EnvelopeKind {
	return []EnvelopeKind{EnvelopeRaw, EnvelopeSNS, EnvelopeEventBridge, EnvelopeUnknown}
}

// Reasons of messages refused for their envelope; an event inside a well-formed envelope
// is refused with Decode's reasons.
const (
	// ReasonUnknownEnvelope: a JSON object that is neither a junban event (it has no
	// event_id and no type), an SNS message nor an EventBridge event; or an SNS message of
	// a type SNS does not send.
	ReasonUnknownEnvelope = "ERR_UNKNOWN_ENVELOPE"
	// ReasonNestedEnvelope: the event inside an envelope is an envelope itself (an
	// EventBridge event published to SNS, say). junban unwraps one envelope.
	ReasonNestedEnvelope = "ERR_NESTED_ENVELOPE"
	// ReasonSNSConfirmation: an SNS SubscriptionConfirmation or UnsubscribeConfirmation,
	// which carries no event; junban never visits its URLs.
	ReasonSNSConfirmation = "ERR_SNS_CONFIRMATION"
	// ReasonDetailTypeMismatch: an EventBridge event whose detail-type is not the type of
	// the event in its detail.
	ReasonDetailTypeMismatch = "ERR_DETAIL_TYPE_MISMATCH"
)

// Envelope is what Unwrap learnt of a message's envelope: its kind, and for SNS and
// EventBridge the fields worth logging and carrying on.
type Envelope struct {
	Kind EnvelopeKind
	// ID is SNS's MessageId or EventBridge's id.
	ID string
	// TopicArn is the SNS topic the notification was published to.
	TopicArn string
	// Subject is an SNS notification's subject, if its publisher gave one (informative).
	Subject string
	// Attributes are an SNS notification's MessageAttributes by name (a traceparent
	// published with the event is one).
	Attributes map[string]SNSAttribute
	// Source is an EventBridge event's source (informative).
	Source string
	// DetailType is an EventBridge event's detail-type: the type of its event.
	DetailType string
	// Time is an EventBridge event's time, as it was written (informative).
	Time string
}

// Bounds of an envelope's fields in a log line (Logged): the longest value AWS writes
// fits whole; what a sender writes beyond it is cut.
const (
	// LogMaxEnvelopeID bounds SNS's MessageId and EventBridge's id (UUIDs, 36 bytes).
	LogMaxEnvelopeID = 64
	// LogMaxTopicArn bounds an SNS TopicArn: a topic's name is at most 256 characters,
	// its ARN's partition, region and account at most 64 more.
	LogMaxTopicArn = 320
	// LogMaxEventBridgeField bounds an EventBridge source and detail-type (256 characters
	// each at most, as PutEvents takes them).
	LogMaxEventBridgeField = 256
)

// Logged returns env with each field a log line quotes (ID, TopicArn, Source,
// DetailType) cut to its bound (LogMax*) at a character's start: a cut field ends with
// "... (cut from N bytes)", so a line says which field was cut and how long it was.
// Invalid UTF-8 is replaced. Subject, Time and Attributes are not logged.
func (e Envelope) Logged() Envelope {
	e.ID = clipLogged(e.ID, LogMaxEnvelopeID)
	e.TopicArn = clipLogged(e.TopicArn, LogMaxTopicArn)
	e.Source = clipLogged(e.Source, LogMaxEventBridgeField)
	e.DetailType = clipLogged(e.DetailType, LogMaxEventBridgeField)
	return e
}

func clipLogged(s string, n int) string {
	if len(s) <= n {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	cut := n
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut-- // not inside a character, when s is valid UTF-8 there
	}
	return fmt.Sprintf("%s... (cut from %d bytes)", strings.ToValidUTF8(s[:cut], "\uFFFD"), len(s))
}

// SNSAttribute is one of an SNS notification's MessageAttributes as SNS writes it into the
// notification: Type is String, String.Array, Number or Binary (Value is then base64).
type SNSAttribute struct {
	Type  string `json:"Type"`
	Value string `json:"Value"`
}

// SNS message types (the notification's "Type").
const (
	snsNotification             = "Notification"
	snsSubscriptionConfirmation = "SubscriptionConfirmation"
	snsUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// Unwrap finds the junban event in a message of the orders queue by the message's shape:
//
//   - an object with both "Type" and "TopicArn" is an SNS message: a Notification's
//     Message (a string) is the event; SNS's other types are refused;
//   - an object with both "detail-type" and "source" is an EventBridge event: its detail
//     (an object) is the event, and detail-type must be the event's type when the event
//     has one;
//   - an object with "event_id" or "type" (matched as Decode matches them) is the event;
//   - any other object is refused with ReasonUnknownEnvelope, and what is not a JSON
//     object with ReasonMalformedJSON.
//
// The event inside an envelope must be a JSON object and no envelope itself
// (ReasonNestedEnvelope); Unwrap checks nothing else of it: DecodeLimits then checks it as
// it checks a raw event, with the same reasons. maxBytes bounds the message as SQS gave it
// (0: MaxEventBytes); the event inside is smaller. An error is an *InvalidError; with it,
// the Envelope says what was recognised (Kind EnvelopeUnknown when nothing was), so that
// the refusal can be logged with the envelope's ids.
func Unwrap(body []byte, maxBytes int) ([]byte, Envelope, error) {
	maxBytes = cmp.Or(max(maxBytes, 0), MaxEventBytes)
	unknown := Envelope{Kind: EnvelopeUnknown}
	if len(body) > maxBytes {
		return nil, unknown, invalid(ReasonTooLarge, "body is %d bytes, the limit is %d", len(body), maxBytes)
	}
	top, err := members(body)
	if err != nil {
		return nil, unknown, invalid(ReasonMalformedJSON, "%v", err)
	}
	switch shapeOf(top) {
	case EnvelopeRaw:
		return body, Envelope{Kind: EnvelopeRaw}, nil
	case EnvelopeSNS:
		return unwrapSNS(top)
	case EnvelopeEventBridge:
		return unwrapEventBridge(top)
	}
	return nil, unknown, invalid(ReasonUnknownEnvelope, "a JSON object with neither event_id nor type, and neither an SNS notification (Type, TopicArn) nor an EventBridge event (detail-type, source)")
}

// members returns the members of a JSON object by their exact names (an SNS message's
// "Type" is not a junban event's "type").
func members(b []byte) (map[string]json.RawMessage, error) {
	if !isObject(b) {
		if !json.Valid(b) {
			var v json.RawMessage
			return nil, json.Unmarshal(b, &v)
		}
		return nil, errNotObject
	}
	var m map[string]json.RawMessage
	if err := unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

var errNotObject = errors.New("not a JSON object")

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// shapeOf classifies an object by its members' names: SNS's and EventBridge's first, by
// names a junban event never has; then a junban event's, matched without regard to case
// as Decode matches them, so that a body Decode took before envelopes is still a raw event
// (unless it also has SNS's or EventBridge's member names).
func shapeOf(top map[string]json.RawMessage) EnvelopeKind {
	has := func(name string) bool { _, ok := top[name]; return ok }
	switch {
	case has("Type") && has("TopicArn"):
		return EnvelopeSNS
	case has("detail-type") && has("source"):
		return EnvelopeEventBridge
	}
	for name := range top {
		if strings.EqualFold(name, "event_id") || strings.EqualFold(name, "type") {
			return EnvelopeRaw
		}
	}
	return EnvelopeUnknown
}

// stringMembers sets each of fields to the member of top of its name, a JSON string, where
// top has one. It sets every field it can, so that a refusal is logged with the
// envelope's ids, and refuses the first member, by name, that is no string.
func stringMembers(top map[string]json.RawMessage, env string, fields map[string]*string) error {
	var bad []string
	for name, v := range fields {
		raw, ok := top[name]
		if !ok || string(raw) == "null" {
			continue
		}
		if json.Unmarshal(raw, v) != nil {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		return invalid(ReasonMalformedJSON, "%s %s is not a string", env, slices.Min(bad))
	}
	return nil
}

func unwrapSNS(top map[string]json.RawMessage) ([]byte, Envelope, error) {
	env := Envelope{Kind: EnvelopeSNS}
	var typ, msg string
	if err := stringMembers(top, "SNS", map[string]*string{
		"Type": &typ, "MessageId": &env.ID, "TopicArn": &env.TopicArn, "Subject": &env.Subject, "Message": &msg,
	}); err != nil {
		return nil, env, err
	}
	if raw, ok := top["MessageAttributes"]; ok && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&env.Attributes); err != nil {
			return nil, env, invalid(ReasonMalformedJSON, "SNS MessageAttributes: %v", err)
		}
	}
	switch typ {
	case snsNotification:
	case snsSubscriptionConfirmation, snsUnsubscribeConfirmation:
		return nil, env, invalid(ReasonSNSConfirmation, "an SNS %s of topic %.200q carries no event (a subscription is confirmed from the queue's account, never by junban)", typ, env.TopicArn)
	default:
		return nil, env, invalid(ReasonUnknownEnvelope, "an SNS message of Type %.40q, not a Notification", typ)
	}
	if env.ID == "" {
		return nil, env, invalid(ReasonMissingField, "SNS MessageId is missing")
	}
	if msg == "" {
		return nil, env, invalid(ReasonMissingField, "the SNS notification has no Message (Subject %.40q, %d MessageAttributes): the event is the Message", env.Subject, len(env.Attributes))
	}
	inner := []byte(msg)
	if err := checkInner(inner, "SNS Message"); err != nil {
		return nil, env, err
	}
	return inner, env, nil
}

func unwrapEventBridge(top map[string]json.RawMessage) ([]byte, Envelope, error) {
	env := Envelope{Kind: EnvelopeEventBridge}
	if err := stringMembers(top, "EventBridge", map[string]*string{
		"detail-type": &env.DetailType, "source": &env.Source, "id": &env.ID, "time": &env.Time,
	}); err != nil {
		return nil, env, err
	}
	if env.DetailType == "" || env.Source == "" {
		return nil, env, invalid(ReasonMissingField, "EventBridge detail-type and source are required")
	}
	detail, ok := top["detail"]
	if !ok || string(detail) == "null" {
		return nil, env, invalid(ReasonMissingField, "EventBridge detail is missing: the event is the detail")
	}
	if err := checkInner(detail, "EventBridge detail"); err != nil {
		return nil, env, err
	}
	// The type as Decode will read it; a type that is no string is Decode's to refuse.
	var probe struct {
		Type event.Type `json:"type"`
	}
	if json.Unmarshal(detail, &probe) == nil && probe.Type != "" && probe.Type != event.Type(env.DetailType) {
		return nil, env, invalid(ReasonDetailTypeMismatch, "EventBridge detail-type %.60q is not the detail's type %.60q", env.DetailType, probe.Type)
	}
	return detail, env, nil
}

// checkInner refuses an envelope's event that is no JSON object, or an envelope itself.
func checkInner(inner []byte, what string) error {
	top, err := members(inner)
	if err != nil {
		return invalid(ReasonMalformedJSON, "%s is not a JSON object: %v", what, err)
	}
	if k := shapeOf(top); k == EnvelopeSNS || k == EnvelopeEventBridge {
		return invalid(ReasonNestedEnvelope, "%s is itself an %s envelope: junban unwraps one", what, envelopeName(k))
	}
	return nil
}

func envelopeName(k EnvelopeKind) string {
	if k == EnvelopeSNS {
		return "SNS"
	}
	return "EventBridge"
}
