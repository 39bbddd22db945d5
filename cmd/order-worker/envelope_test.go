package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/testenv"
)

const envTopic = "arn:aws:sns:ap-northeast-1:123456789012:shop-orders"

// snsWrapped is event as SNS delivers it to a queue subscribed without raw message
// delivery; edit changes the notification's members.
func snsWrapped(t *testing.T, event string, edit map[string]any) string {
	t.Helper()
	n := map[string]any{
		"Type": "Notification", "MessageId": "mid-" + testenv.ID(), "TopicArn": envTopic, "Subject": "order event",
		"Message": event, "Timestamp": "2026-12-01T09:30:00.123Z", "SignatureVersion": "1", "Signature": "EXAMPLE",
		"SigningCertURL": "https://sns.ap-northeast-1.amazonaws.com/SimpleNotificationService-0000.pem",
		"UnsubscribeURL": "https://sns.ap-northeast-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + envTopic + ":1",
	}
	for k, v := range edit {
		n[k] = v
	}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ebWrapped is event as an EventBridge rule delivers it to a queue.
func ebWrapped(t *testing.T, detailType, event string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"version": "0", "id": "eb-" + testenv.ID(), "detail-type": detailType, "source": "shop.checkout",
		"account": "123456789012", "time": "2026-12-01T09:30:00Z", "region": "ap-northeast-1", "resources": []string{},
		"detail": json.RawMessage(event),
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Orders published to an SNS topic and to an EventBridge bus, fanned out to the orders
// queue, apply as if sent raw: the worker hands the event inside to its turn, so a payment
// that came before its order parks as a junban event and applies with it; a notification
// of SQS's largest size whose event is valid applies. A wrapped event that can never apply
// goes to the DLQ as it came, with the reason of the event inside; a message whose
// envelope is wrong with the envelope's.
func TestEnvelopedEventsThroughTheQueue(t *testing.T) {
	f := newFleet(t)
	run := testenv.ID()
	sku := "EN-SKU-" + run
	f.seed(boundsInventory(sku))
	f.start(1)
	ctx := context.Background()

	placed := func(id, lcid string, qty int) string {
		b, _ := json.Marshal(event.Order{EventID: id, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(),
			Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":` + fmt.Sprint(qty) + `}]}`)})
		return string(b)
	}
	ids := func(s ...string) (out []string) {
		for _, x := range s {
			out = append(out, x+"-"+run)
		}
		return out
	}
	lcidA, lcidB, lcidC := "EN-A-"+run, "EN-B-"+run, "EN-C-"+run
	id := ids("paid-a", "placed-a", "placed-b", "placed-c")
	paidA, err := json.Marshal(event.Order{EventID: id[0], Type: event.PaymentConfirmed, LCID: lcidA, OccurredAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}

	// The payment, in a notification, before its order: it parks, stored as the event alone.
	f.sendRaw(snsWrapped(t, string(paidA), map[string]any{"MessageAttributes": map[string]any{
		"traceparent": map[string]string{"Type": "String", "Value": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}))
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := order.LoadState(ctx, f.rc, f.prefix, lcidA)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Parked) == 1 {
			if string(st.Parked[0].Body) != string(paidA) {
				t.Fatalf("parked %s, want the event alone %s", st.Parked[0].Body, paidA)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wrapped payment did not park: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Its order in an EventBridge event; another in a notification; a third in a
	// notification of exactly domain.MaxEventBytes (SQS's largest message).
	placedC := placed(id[3], lcidC, 1)
	padded := func(pad int) string {
		return snsWrapped(t, placedC, map[string]any{"MessageId": "mid-big-" + run, "MessageAttributes": map[string]any{
			"pad": map[string]string{"Type": "String", "Value": strings.Repeat("p", pad)}}})
	}
	big := padded(domain.MaxEventBytes - len(padded(0)))
	if len(big) != domain.MaxEventBytes {
		t.Fatalf("the large notification is %d bytes, want %d", len(big), domain.MaxEventBytes)
	}
	f.sendRaw(ebWrapped(t, "order.placed", placed(id[1], lcidA, 2)), snsWrapped(t, placed(id[2], lcidB, 3), nil), big)
	want := map[string]bool{}
	for _, x := range id {
		want[x] = true
	}
	f.collect(want, time.Minute, nil)
	for _, x := range id {
		if r := f.results[x][0]; r.Outcome != event.Applied {
			t.Errorf("%s: %s/%s (%s)", x, r.Outcome, r.Reason, r.Detail)
		}
	}
	if r := f.results[id[0]][0]; r.Order == nil || !r.Order.Paid || r.Entity != lcidA {
		t.Errorf("the wrapped payment's result: %+v", r)
	}

	// Refused, each as it came, with its reason.
	zero := `{"event_id":"bad-1-` + run + `","type":"order.placed","lcid":"EN-D-` + run + `","data":{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":0}]}}`
	unknown := `{"event_id":"bad-2-` + run + `","type":"order.teleported","lcid":"EN-E-` + run + `"}`
	bad := map[string]string{
		snsWrapped(t, zero, nil):                  domain.ReasonInvalidQuantity + ": data.lines[0]",
		ebWrapped(t, "order.teleported", unknown): domain.ReasonUnknownType,
		snsWrapped(t, "order EN-F placed", nil):   domain.ReasonMalformedJSON + ": SNS Message",
		snsWrapped(t, "", map[string]any{"Type": "SubscriptionConfirmation", "Message": "confirm", "Token": "t"}): domain.ReasonSNSConfirmation,
		ebWrapped(t, "order.placed", snsWrapped(t, placed("bad-3-"+run, "EN-G-"+run, 1), nil)):                    domain.ReasonNestedEnvelope,
	}
	var bodies []string
	for b := range bad {
		bodies = append(bodies, b)
	}
	f.sendRaw(bodies...)
	reasons, copies := f.deadLettered(len(bad), time.Minute)
	for body, reason := range bad {
		if got, ok := reasons[body]; !ok {
			t.Errorf("not in the DLQ as it was sent: %.120s", body)
		} else if !strings.HasPrefix(got, reason) || copies[body] != 1 {
			t.Errorf("%.120s: DLQ reason %q (%d copies), want %s once", body, got, copies[body], reason)
		}
	}
	for _, x := range []string{"bad-1-" + run, "bad-2-" + run, "bad-3-" + run} {
		if _, ok := f.results[x]; ok {
			t.Errorf("a refused event has a result: %s", x)
		}
	}
}
