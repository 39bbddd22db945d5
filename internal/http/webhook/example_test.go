package webhook_test

import (
	"fmt"
	"time"

	"github.com/junban/junban/internal/http/webhook"
)

// A provider signs, the gateway verifies; a rotated-out secret still verifies while it
// is listed.
func ExampleProvider_Verify() {
	now := time.Unix(1795946400, 0)
	body := []byte(`{"type":"payment.succeeded","timestamp":"2026-11-29T10:00:00Z","data":{"lcid":"LC-1"}}`)
	sender, _ := webhook.NewProvider("acme", webhook.KindStandard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	h, _ := sender.Sign("msg_1", now, body)

	gateway, _ := webhook.ParseProviders("acme:standard:whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY" + "|whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	signed, err := gateway[0].Verify(h, body, now.Add(time.Minute), webhook.ToleranceDefault)
	fmt.Println(signed.ID, err)

	_, err = gateway[0].Verify(h, body, now.Add(10*time.Minute), webhook.ToleranceDefault)
	fmt.Println(err)

	ev, _ := webhook.Parse(webhook.KindStandard, signed.ID, body)
	order, _ := webhook.Map("acme", webhook.KindStandard, ev)
	fmt.Println(order.Type, order.LCID, order.EventID == webhook.OrderEventID("acme", "msg_1"))
	// Output:
	// msg_1 <nil>
	// webhook: signature check failed: timestamp too old
	// payment.confirmed LC-1 true
}
