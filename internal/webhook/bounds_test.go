package webhook_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/webhook"
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
		if _, err := order.Decode(body, 0); order.InvalidReason(err) != order.ReasonInvalidID {
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

// With MaxInFlight deliveries inside the handler (each still sending its body), the next
// one gets 503 with Retry-After at once, without a byte of its body read (its body never
// comes: reading it would hang the test), and the refusal is counted. Once the held
// deliveries finish, a delivery goes through. (Without the bound the extra delivery
// waits on its body, and the test fails on its deadline; tried.)
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	const bound = 3
	g := newGateway(t, options{maxInFlight: bound})
	type held struct {
		w    *io.PipeWriter
		body []byte
		code chan int
	}
	client := &http.Client{}
	send := func(body io.Reader, h http.Header) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, g.url+"/webhooks/stripe", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header, req.ContentLength = h, -1
		return client.Do(req)
	}
	var hs []held
	var wg sync.WaitGroup
	// On a failure the held deliveries end too, or the test server would wait for them.
	defer func() {
		for _, x := range hs {
			x.w.CloseWithError(io.ErrUnexpectedEOF)
		}
		wg.Wait()
	}()
	for i := range bound {
		body := stripeBody(t, "evt_held_"+string(rune('a'+i)), "payment_intent.succeeded", "LC-1", 100)
		h, _ := g.stripe.Sign("", g.now, body)
		r, w := io.Pipe()
		x := held{w: w, body: body, code: make(chan int, 1)}
		hs = append(hs, x)
		wg.Go(func() {
			resp, err := send(r, h)
			if err != nil {
				t.Error(err)
				x.code <- 0
				return
			}
			resp.Body.Close()
			x.code <- resp.StatusCode
		})
	}
	// Each held delivery is inside the handler, waiting for the rest of its body.
	testenv.WaitFor(t, 10*time.Second, "the held deliveries in flight", func() bool {
		return gaugeValue(t, g.reg, "junban_webhook_in_flight") >= bound
	})

	// A gateway that waits for this body gets its end after 20 s (the transport keeps
	// writing it, so only its end frees the call), and answers something else than 503.
	never, neverW := io.Pipe()
	defer neverW.Close()
	time.AfterFunc(20*time.Second, func() { neverW.Close() })
	h, _ := g.stripe.Sign("", g.now, []byte("{}"))
	resp, err := send(never, h)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !bytes.Contains(b, []byte(`"busy"`)) {
		t.Fatalf("delivery %d: %d Retry-After %q %s, want 503 busy with Retry-After", bound+1, resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if n := counterValue(t, g.reg, "junban_webhook_busy_refusals_total"); n != 1 {
		t.Errorf("busy_refusals_total = %v, want 1", n)
	}

	for _, x := range hs {
		x.w.Write(x.body)
		x.w.Close()
	}
	wg.Wait()
	for i, x := range hs {
		if c := <-x.code; c != http.StatusOK {
			t.Errorf("held delivery %d: %d, want 200", i, c)
		}
	}
	if a := g.post(delivery{provider: g.stripe, body: stripeBody(t, "evt_after", "payment_intent.succeeded", "LC-2", 100)}); a.code != http.StatusOK {
		t.Fatalf("after the held deliveries: %d %s", a.code, a.body)
	}
	if v := gaugeValue(t, g.reg, "junban_webhook_in_flight"); v != 0 {
		t.Errorf("in flight %v after every delivery ended", v)
	}
}
