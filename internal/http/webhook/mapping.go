package webhook

import (
	"github.com/google/uuid"

	"github.com/junban/junban/internal/event"
)

// Route is one row of the mapping from provider event types to order events.
type Route struct {
	Kind         Kind
	ProviderType string
	// Order is the order event to publish; empty means the event is acknowledged (200)
	// and ignored, for the reason in Ignore.
	Order event.Type
	// Ignore says why an event of this type publishes nothing.
	Ignore string
}

// Routes is the mapping table (docs/webhooks.md shows it). A type not listed is
// acknowledged and ignored (IgnoreUnknownType): a provider retries any non-2xx answer
// for days, and an endpoint subscribed to more types than junban needs is no error.
var Routes = []Route{
	{Kind: KindStripe, ProviderType: "payment_intent.succeeded", Order: event.PaymentConfirmed},
	{Kind: KindStripe, ProviderType: "charge.refunded", Order: event.OrderCancelled},
	{Kind: KindStripe, ProviderType: "payment_intent.payment_failed", Ignore: IgnorePaymentFailed},
	{Kind: KindStandard, ProviderType: "payment.succeeded", Order: event.PaymentConfirmed},
	{Kind: KindStandard, ProviderType: "payment.refunded", Order: event.OrderCancelled},
	{Kind: KindStandard, ProviderType: "payment.failed", Ignore: IgnorePaymentFailed},
}

// Reasons for acknowledging an event without an order event.
const (
	// IgnorePaymentFailed: a failed payment attempt changes nothing in junban; the order
	// stays unpaid and the customer may pay again (a later success confirms it).
	IgnorePaymentFailed = "payment_failed"
	// IgnorePartialRefund: a partial refund does not cancel the order.
	IgnorePartialRefund = "partial_refund"
	// IgnoreUnknownType: junban does not act on this event type.
	IgnoreUnknownType = "unhandled_type"
)

func routeOf(kind Kind, providerType string) (Route, bool) {
	for _, r := range Routes {
		if r.Kind == kind && r.ProviderType == providerType {
			return r, true
		}
	}
	return Route{}, false
}

// webhookNamespace scopes the order event ids derived from webhooks.
var webhookNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://junban/webhook"))

// OrderEventID is the order event id of a provider event: a name-based UUID (v5) of the
// provider's name and event id, so every gateway derives the same id for one webhook
// and the order-worker's done:<event_id> stops any second copy.
func OrderEventID(provider, providerEventID string) string {
	return "wh-" + uuid.NewSHA1(webhookNamespace, []byte(provider+"\x00"+providerEventID)).String()
}

// Map turns a provider event into the order event to publish, or nil and the reason
// it is ignored.
func Map(provider string, kind Kind, ev ProviderEvent) (*event.Order, string) {
	r, ok := routeOf(kind, ev.Type)
	switch {
	case !ok:
		return nil, IgnoreUnknownType
	case r.Order == "":
		return nil, r.Ignore
	case r.Order == event.OrderCancelled && ev.PartialRefund:
		return nil, IgnorePartialRefund
	}
	return &event.Order{
		EventID:    OrderEventID(provider, ev.ID),
		Type:       r.Order,
		LCID:       ev.LCID,
		OccurredAt: ev.OccurredAt,
	}, ""
}
