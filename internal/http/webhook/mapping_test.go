package webhook_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
)

// reservedLCIDs are lcids in a SKU's namespace: an order event carrying one would run in
// that SKU's turn, among the warehouse's events.
var reservedLCIDs = []string{"sku:SKU-B", "sku:", "sku:LC-1"}

// A payload whose lcid is in a SKU's namespace is refused by Parse, for every route that
// maps to an order event and for the ignored ones alike, in both dialects: Map never sees
// it, so no order event carries it. Failed against the gateway that checked the lcid with
// event.CheckID alone: every one parsed, and Map forwarded the lcid.
func TestMetadataLCIDInASKUsNamespaceIsRefused(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, r := range webhook.Routes {
		for _, lcid := range reservedLCIDs {
			ev := webhook.ProviderEvent{ID: "evt_1", Type: r.ProviderType, LCID: lcid, OccurredAt: at, PaymentID: "pi_1", Amount: 100, Currency: "jpy"}
			body, err := webhook.Encode(r.Kind, ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := webhook.Parse(r.Kind, ev.ID, body)
			if !errors.Is(err, webhook.ErrInvalidPayload) {
				o, _ := webhook.Map("p", r.Kind, got)
				t.Errorf("%s %s with lcid %q: %v, forwarded %+v; want ErrInvalidPayload", r.Kind, r.ProviderType, lcid, err, o)
				continue
			}
			if !strings.Contains(err.Error(), "lcid") || !strings.Contains(err.Error(), "sku:") {
				t.Errorf("%s %s with lcid %q: the error does not say what is wrong: %v", r.Kind, r.ProviderType, lcid, err)
			}
		}
		// An lcid that merely looks alike is an order's.
		ev := webhook.ProviderEvent{ID: "evt_1", Type: r.ProviderType, LCID: "SKU:SKU-B", OccurredAt: at}
		body, _ := webhook.Encode(r.Kind, ev)
		got, err := webhook.Parse(r.Kind, ev.ID, body)
		if err != nil {
			t.Fatalf("%s %s with lcid SKU:SKU-B: %v", r.Kind, r.ProviderType, err)
		}
		if o, _ := webhook.Map("p", r.Kind, got); o != nil && o.LCID != "SKU:SKU-B" {
			t.Fatalf("%s %s: forwarded lcid %q", r.Kind, r.ProviderType, o.LCID)
		}
	}
}

// Through the gateway: such a delivery gets 400 invalid_payload before any 200, and
// nothing reaches the orders queue. Failed against the old check: 200 and an order event
// payment.confirmed for lcid sku:SKU-B on the queue.
func TestMetadataLCIDInASKUsNamespaceGets400(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	for i, lcid := range reservedLCIDs {
		id := "evt_sku_" + string(rune('a'+i))
		if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, id, "payment_intent.succeeded", lcid, 100)}); a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "invalid_payload") {
			t.Errorf("stripe metadata lcid %q: %d %s, want 400 invalid_payload", lcid, a.code, a.body)
		}
		body, _ := webhook.Encode(webhook.KindStandard, webhook.ProviderEvent{ID: "msg_" + id, Type: "payment.refunded", LCID: lcid, OccurredAt: g.now})
		if a := g.post(delivery{provider: g.acme, id: "msg_" + id, body: body}); a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "invalid_payload") {
			t.Errorf("standard lcid %q: %d %s, want 400 invalid_payload", lcid, a.code, a.body)
		}
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order events for refused lcids: %+v", evs)
	}
}

// FuzzForwardedEventsDecode: whatever payload Parse accepts, the order event Map makes of
// it decodes in the order-worker, runs in its lcid's turn and never in a SKU's. The
// gateway answers 200 only for what the worker will take.
func FuzzForwardedEventsDecode(f *testing.F) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, r := range webhook.Routes {
		for _, lcid := range append([]string{"LC-1", "SKU:1", "注文-1", ""}, reservedLCIDs...) {
			ev := webhook.ProviderEvent{ID: "evt_1", Type: r.ProviderType, LCID: lcid, OccurredAt: at, Amount: 100, Currency: "jpy"}
			body, _ := webhook.Encode(r.Kind, ev)
			f.Add(r.Kind == webhook.KindStripe, ev.ID, body)
		}
	}
	f.Fuzz(func(t *testing.T, stripe bool, id string, body []byte) {
		kind := webhook.KindStandard
		if stripe {
			kind = webhook.KindStripe
		}
		ev, err := webhook.Parse(kind, id, body)
		if err != nil {
			return
		}
		o, ignore := webhook.Map("stripe", kind, ev)
		if o == nil {
			if ignore == "" {
				t.Fatalf("nothing forwarded, no reason: %+v", ev)
			}
			return
		}
		if err := event.CheckLCID(o.LCID); err != nil || o.LCID == "" {
			t.Fatalf("forwarded lcid %q: %v", o.LCID, err)
		}
		msg, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := domain.Decode(msg, 0)
		if err != nil {
			t.Fatalf("forwarded %s, the worker refuses it: %v", msg, err)
		}
		if dec.Entity() != o.LCID || strings.HasPrefix(dec.Entity(), event.SKUEntityPrefix) {
			t.Fatalf("forwarded %s runs in the turn %q", msg, dec.Entity())
		}
	})
}
