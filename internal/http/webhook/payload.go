package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/redis/idempotency"
)

// ErrInvalidPayload: the body is not JSON or lacks a field the event needs (400).
var ErrInvalidPayload = errors.New("webhook: invalid payload")

// MaxLCIDLength bounds an lcid taken from a payload.
const MaxLCIDLength = 128

// ProviderEvent is a provider's webhook event, parsed and validated: the fields junban
// acts on, in one shape for every dialect. Its canonical JSON is what the payload hash
// covers (see Hash).
type ProviderEvent struct {
	// ID is the provider's event id (Stripe's event id, or webhook-id): the
	// idempotency key together with the provider's name.
	ID string `json:"id"`
	// Type is the provider's event type (payment_intent.succeeded, payment.refunded, ...).
	Type string `json:"type"`
	// OccurredAt is when the provider says the event happened.
	OccurredAt time.Time `json:"occurred_at"`
	// LCID is the order the payment belongs to (Stripe: data.object.metadata.lcid;
	// Standard: data.lcid). Required for the types that map to an order event.
	LCID string `json:"lcid,omitempty"`
	// PaymentID is the provider's id of the payment object (informational).
	PaymentID string `json:"payment_id,omitempty"`
	// Amount and Currency of the payment or refund (informational).
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// PartialRefund marks a refund that does not cover the whole payment: it does not
	// cancel the order.
	PartialRefund bool `json:"partial_refund,omitempty"`
}

// PayloadHash is the payload hash of the idempotency record: SHA-256 of the event's
// canonical JSON. Two deliveries that carry the same facts hash alike even when a
// provider re-serialises its JSON or adds fields junban does not read; a different fact
// under the same id does not.
func (e ProviderEvent) PayloadHash() string {
	b, _ := json.Marshal(e)
	return idempotency.Hash(b)
}

// stripeEvent is the part of a Stripe event junban reads.
type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    *struct {
		Object *struct {
			ID       string            `json:"id"`
			Amount   int64             `json:"amount"`
			Currency string            `json:"currency"`
			Refunded *bool             `json:"refunded"`
			Metadata map[string]string `json:"metadata"`
		} `json:"object"`
	} `json:"data"`
}

// standardEvent is the payload Standard Webhooks recommends: type, timestamp, data.
type standardEvent struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      *struct {
		LCID      string `json:"lcid"`
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
		Partial   bool   `json:"partial"`
	} `json:"data"`
}

// Parse reads body as an event of kind. id is the signed webhook-id for
// KindStandard (ignored for Stripe, whose id is in the body). Errors wrap
// ErrInvalidPayload.
func Parse(kind Kind, id string, body []byte) (ProviderEvent, error) {
	switch kind {
	case KindStripe:
		return parseStripe(body)
	case KindStandard:
		return parseStandard(id, body)
	}
	return ProviderEvent{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidPayload, kind)
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the JSON object", ErrInvalidPayload)
	}
	return nil
}

func missing(field string) error { return fmt.Errorf("%w: %s is missing", ErrInvalidPayload, field) }

func parseStripe(body []byte) (ProviderEvent, error) {
	var s stripeEvent
	if err := decodeStrict(body, &s); err != nil {
		return ProviderEvent{}, err
	}
	switch {
	case s.ID == "":
		return ProviderEvent{}, missing("id")
	case s.Type == "":
		return ProviderEvent{}, missing("type")
	case s.Created <= 0:
		return ProviderEvent{}, missing("created")
	case s.Data == nil || s.Data.Object == nil:
		return ProviderEvent{}, missing("data.object")
	}
	o := s.Data.Object
	ev := ProviderEvent{
		ID:         s.ID,
		Type:       s.Type,
		OccurredAt: time.Unix(s.Created, 0).UTC(),
		LCID:       o.Metadata["lcid"],
		PaymentID:  o.ID,
		Amount:     o.Amount,
		Currency:   o.Currency,
		// charge.refunded comes for partial refunds too; refunded is true only once the
		// whole charge is refunded.
		PartialRefund: o.Refunded != nil && !*o.Refunded,
	}
	return ev, validate(ev, KindStripe, "data.object.metadata.lcid")
}

func parseStandard(id string, body []byte) (ProviderEvent, error) {
	var s standardEvent
	if err := decodeStrict(body, &s); err != nil {
		return ProviderEvent{}, err
	}
	switch {
	case id == "":
		return ProviderEvent{}, missing("webhook-id")
	case s.Type == "":
		return ProviderEvent{}, missing("type")
	case s.Timestamp == "":
		return ProviderEvent{}, missing("timestamp")
	case s.Data == nil:
		return ProviderEvent{}, missing("data")
	}
	at, err := time.Parse(time.RFC3339Nano, s.Timestamp)
	if err != nil {
		return ProviderEvent{}, fmt.Errorf("%w: timestamp is not RFC 3339", ErrInvalidPayload)
	}
	ev := ProviderEvent{
		ID:            id,
		Type:          s.Type,
		OccurredAt:    at.UTC(),
		LCID:          s.Data.LCID,
		PaymentID:     s.Data.PaymentID,
		Amount:        s.Data.Amount,
		Currency:      s.Data.Currency,
		PartialRefund: s.Data.Partial,
	}
	return ev, validate(ev, KindStandard, "data.lcid")
}

func validate(ev ProviderEvent, kind Kind, lcidField string) error {
	if y := ev.OccurredAt.Year(); y < 1970 || y > 9999 {
		return fmt.Errorf("%w: event time %d is outside the years 1970 to 9999", ErrInvalidPayload, y)
	}
	if len(ev.ID) > MaxIDLength || !printable(ev.ID) {
		return fmt.Errorf("%w: event id is longer than %d or not printable", ErrInvalidPayload, MaxIDLength)
	}
	if len(ev.Type) > 128 || !printable(ev.Type) {
		return fmt.Errorf("%w: type is longer than 128 or not printable", ErrInvalidPayload)
	}
	if ev.LCID != "" && (len(ev.LCID) > MaxLCIDLength || !printable(ev.LCID)) {
		return fmt.Errorf("%w: %s is longer than %d or not printable", ErrInvalidPayload, lcidField, MaxLCIDLength)
	}
	// The lcid travels in the order event, whose decode refuses what event.CheckLCID
	// refuses (a brace would break the hash tag of the order's keys, "sku:" would put the
	// order in a SKU's turn): such a delivery gets 400 here, before any 200, not a DLQ
	// entry behind a 200. The provider's id is held to CheckID: it names the delivery's
	// idempotency record.
	if err := event.CheckID(ev.ID); err != nil {
		return fmt.Errorf("%w: event id: %v", ErrInvalidPayload, err)
	}
	if err := event.CheckLCID(ev.LCID); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidPayload, lcidField, err)
	}
	if r, ok := routeOf(kind, ev.Type); ok && r.Order != "" && ev.LCID == "" {
		return missing(lcidField)
	}
	return nil
}

func printable(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == unicode.ReplacementChar }) < 0
}

// Encode returns a payload of kind that Parse reads back as ev (ev.ID travels in the
// webhook-id header for KindStandard). It serves junbanctl, junbanlab and tests.
func Encode(kind Kind, ev ProviderEvent) ([]byte, error) {
	switch kind {
	case KindStripe:
		obj := map[string]any{
			"id": ev.PaymentID, "amount": ev.Amount, "currency": ev.Currency,
			"metadata": map[string]string{"lcid": ev.LCID},
		}
		switch {
		case ev.PartialRefund:
			obj["refunded"] = false
		case strings.HasSuffix(ev.Type, "refunded"):
			obj["refunded"] = true
		}
		return json.Marshal(map[string]any{
			"id": ev.ID, "object": "event", "type": ev.Type, "created": ev.OccurredAt.Unix(),
			"data": map[string]any{"object": obj},
		})
	case KindStandard:
		return json.Marshal(map[string]any{
			"type": ev.Type, "timestamp": ev.OccurredAt.UTC().Format(time.RFC3339Nano),
			"data": map[string]any{
				"lcid": ev.LCID, "payment_id": ev.PaymentID, "amount": ev.Amount,
				"currency": ev.Currency, "partial": ev.PartialRefund,
			},
		})
	}
	return nil, fmt.Errorf("webhook: unknown kind %q", kind)
}
