package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/testenv"
)

// An lcid the order-worker would refuse at decode (a brace, a control character, NUL)
// gets 400 before any 200: nothing is published, nothing is recorded, so the provider
// learns at once that its payload is wrong instead of a 200 behind which the event goes
// to the orders DLQ. The provider's event id is held to the same rule.
func TestIDsTheWorkerWouldRefuseGet400(t *testing.T) {
	t.Parallel()
	g := newGateway(t, options{})
	for name, lcid := range map[string]string{
		"brace":      "LC-{1}",
		"open brace": "LC{",
		"NUL":        "LC-\x00",
		"newline":    "LC-\n1",
		"C1 control": "LC-\u00851",
	} {
		// The worker refuses it too: the gateway applies the same check.
		body, _ := json.Marshal(event.Order{EventID: "e1", Type: event.PaymentConfirmed, LCID: lcid})
		if _, err := domain.Decode(body, 0); domain.InvalidReason(err) != domain.ReasonInvalidID {
			t.Fatalf("%s: the worker's decode says %v", name, err)
		}
		if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_bad_"+name, "payment_intent.succeeded", lcid, 100)}); a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "invalid_payload") {
			t.Errorf("stripe lcid with %s: %d %s, want 400 invalid_payload", name, a.code, a.body)
		}
		sbody, _ := webhook.Encode(webhook.KindStandard, webhook.ProviderEvent{ID: "msg_" + name, Type: "payment.succeeded", LCID: lcid, OccurredAt: g.now})
		if a := g.post(delivery{provider: g.acme, id: "msg_bad", body: sbody}); a.code != http.StatusBadRequest {
			t.Errorf("standard lcid with %s: %d %s, want 400", name, a.code, a.body)
		}
	}
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_{x}", "payment_intent.succeeded", "LC-1", 100)}); a.code != http.StatusBadRequest {
		t.Errorf("stripe event id with braces: %d %s, want 400", a.code, a.body)
	}
	if a := g.post(delivery{provider: g.acme, id: "msg_{x}", body: []byte(`{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1"}}`)}); a.code != http.StatusBadRequest {
		t.Errorf("webhook-id with braces: %d %s, want 400", a.code, a.body)
	}
	if evs := g.orderEvents(); len(evs) != 0 {
		t.Fatalf("order events for refused ids: %+v", evs)
	}
	// The same delivery with a good lcid goes through.
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_good", "payment_intent.succeeded", "LC-1", 100)}); a.code != http.StatusOK {
		t.Fatalf("good delivery: %d %s", a.code, a.body)
	}
	g.exactlyOne(webhook.OrderEventID("stripe", "evt_good"), event.PaymentConfirmed)
}

// gaugeValue reads an unlabelled gauge from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// heldPublisher sends to the real queue, but only once release is closed: the deliveries
// that reach it hold their in-flight slots until then.
type heldPublisher struct {
	next    webhook.Publisher
	release chan struct{}
}

func (p heldPublisher) Publish(ctx context.Context, msg []byte) error {
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.next.Publish(ctx, msg)
}

// With MaxInFlight signed deliveries in their Redis and SQS work (their sends held), the
// next signed one gets 503 with Retry-After at once, before any Redis or SQS work, and the
// refusal is counted; a delivery nobody signed still gets its 401 (it never takes a slot).
// Once the held deliveries finish, a delivery goes through. Broken variant tried: with no
// bound the extra delivery waited in its held send and got 503 unavailable at its publish
// timeout, not busy.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	const bound = 3
	release := make(chan struct{})
	sqsc := testenv.SQS(t)
	queueURL := testenv.NewQueues(t, sqsc, 60).Orders.URL
	g := newGateway(t, options{maxInFlight: bound, queueURL: queueURL, publishTimeout: 20 * time.Second, lockTTL: 30 * time.Second,
		publisher: heldPublisher{next: webhook.SQSPublisher{Client: sqsc, QueueURL: queueURL}, release: release}})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	codes := make(chan int, bound)
	var wg sync.WaitGroup
	for i := range bound {
		body := stripeBody(t, "evt_held_"+string(rune('a'+i)), "payment_intent.succeeded", "LC-1", 100)
		wg.Go(func() { codes <- g.post(delivery{provider: g.stripe, body: body}).code })
	}
	testenv.WaitFor(t, 30*time.Second, "the held deliveries in flight", func() bool {
		return gaugeValue(t, g.reg, "junban_webhook_in_flight") >= bound
	})

	a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_extra", "payment_intent.succeeded", "LC-1", 100)})
	if a.code != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || !bytes.Contains(a.body, []byte(`"busy"`)) {
		t.Fatalf("delivery %d: %d Retry-After %q %s, want 503 busy with Retry-After", bound+1, a.code, a.header.Get("Retry-After"), a.body)
	}
	if n := counterValue(t, g.reg, "junban_webhook_busy_refusals_total"); n != 1 {
		t.Errorf("busy_refusals_total = %v, want 1", n)
	}
	h, _ := g.stripe.Sign("", g.now, []byte("{}"))
	if a := g.post(delivery{provider: g.stripe, header: h, body: []byte(`{"id":"x"}`)}); a.code != http.StatusUnauthorized {
		t.Errorf("unsigned delivery while the slots are taken: %d %s, want 401", a.code, a.body)
	}

	close(release)
	released = true
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("held delivery: %d, want 200", c)
		}
	}
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_after", "payment_intent.succeeded", "LC-2", 100)}); a.code != http.StatusOK {
		t.Fatalf("after the held deliveries: %d %s", a.code, a.body)
	}
	if v := gaugeValue(t, g.reg, "junban_webhook_in_flight"); v != 0 {
		t.Errorf("in flight %v after every delivery ended", v)
	}
}
