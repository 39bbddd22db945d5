package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/loadgen"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// The fleet with the persist-worker publishing to an outbound topic, a shop's queue
// subscribed to it (raw). A handful of orders, one event at a time: A placed (allocated),
// paid and shipped; B placed for more than there is (refused, ERR_SHORTAGE); C placed,
// which leaves the SKU low, then cancelled (back); then the warehouse counts the lot short
// (out). The shop's queue gets, per order and SKU in seq order, the kinds those tell, every
// body valid against its schema, and the check against the outbox finds nothing missing,
// unknown or out of sequence.
func TestOutboundEventsReachASubscriber(t *testing.T) { outboundToASubscriber(t, false) }

// The same through a FIFO topic to a FIFO queue: each entity's messages travel in its
// message group, so the shop receives them in seq order, not only numbered so.
func TestOutboundEventsReachAFIFOSubscriber(t *testing.T) { outboundToASubscriber(t, true) }

func outboundToASubscriber(t *testing.T, fifo bool) {
	sn := testenv.SNS(t)
	ctx := context.Background()
	pgURL := testenv.PostgresURL(t)
	db, err := (config.Postgres{URL: pgURL}).Open()
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 20)
	var topic string
	shopIn := &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name(t) + "-shop")}
	if fifo {
		name := testenv.Name(t) + ".fifo"
		tp, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: map[string]string{"FifoTopic": "true"}})
		if err != nil {
			t.Fatal(err)
		}
		topic = aws.ToString(tp.TopicArn)
		t.Cleanup(func() { sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(topic)}) })
		shopIn = &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"FifoQueue": "true"}}
	} else {
		topic = testenv.Topic(t, sn)
	}
	shop, err := c.CreateQueue(ctx, shopIn)
	if err != nil {
		t.Fatal(err)
	}
	shopURL := aws.ToString(shop.QueueUrl)
	t.Cleanup(func() { c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(shopURL)}) })
	if _, err := topics.Subscribe(ctx, sn, c, topics.Spec{TopicARN: topic, QueueURL: shopURL, Raw: true}); err != nil {
		t.Fatal(err)
	}

	run := "T" + testenv.ID()
	sku := run + "-SKU"
	if err := loadgen.Import(ctx, db, []stock.SKU{{SKU: sku, Lots: []stock.Lot{{
		LotID: "L1", Kind: stock.KindOnHand, Good: true, BestBefore: "2027-01-01", RegSeq: 1,
		ValidFrom: "2026-01-01", ValidTo: "2027-12-31", Sellable: 5}}}}); err != nil {
		t.Fatal(err)
	}
	// Low at 2 or below: 3 left after A is ok, 1 left after C is low.
	if err := db.Exec(`UPDATE skus SET low_stock_threshold = 2 WHERE sku = ?`, sku).Error; err != nil {
		t.Fatal(err)
	}

	_, prefix := testenv.Redis(t)
	env := append(testenv.Env(t),
		"JUNBAN_KEY_PREFIX="+prefix, "DATABASE_URL="+pgURL,
		"JUNBAN_ORDERS_QUEUE="+q.Orders.URL, "JUNBAN_ORDERS_DLQ="+q.Orders.DLQURL,
		"JUNBAN_RESULTS_QUEUE="+q.Results.URL, "JUNBAN_RESULTS_DLQ="+q.Results.DLQURL,
		"JUNBAN_SQS_WAIT_SECONDS=1", "JUNBAN_LOG_LEVEL=warn", "JUNBAN_SHUTDOWN_BUDGET=5s",
	)
	testenv.Start(t, "order-worker", testenv.Binary(t, "order-worker"), env)
	testenv.Start(t, "persist-worker", testenv.Binary(t, "persist-worker"),
		append(env, "AWS_ENDPOINT_URL_SNS="+testenv.SNSEndpoint(t), "JUNBAN_OUTBOX_TOPIC_ARN="+topic))
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: q.Orders.URL, Keys: domain.OrderKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })

	today := time.Now().UTC().Format("2006-01-02")
	n := 0
	// send sends one event and waits for its result in PostgreSQL, so that each batch
	// holds one result and the messages are the steps' own.
	send := func(typ event.Type, lcid string, data any) {
		t.Helper()
		n++
		e := event.Order{EventID: fmt.Sprintf("%s-%02d", run, n), Type: typ, OccurredAt: time.Now().UTC()}
		if lcid != "" {
			e.LCID = run + "-" + lcid
		}
		if data != nil {
			e.Data, _ = json.Marshal(data)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.PublishBatch(ctx, [][]byte{b}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, time.Minute, "the result of "+e.EventID+" in PostgreSQL", func() bool {
			var rows []persist.InboxRow
			return db.Where("event_id = ?", e.EventID).Find(&rows).Error == nil && len(rows) > 0
		})
	}
	placed := func(qty int64) event.OrderData {
		return event.OrderData{Mode: stock.ModeShip, TargetDate: today, Lines: []event.Line{{LineID: "1", SKU: sku, Qty: qty}}}
	}
	send(event.OrderPlaced, "A", placed(2))
	send(event.PaymentConfirmed, "A", nil)
	send(event.OrderShipped, "A", nil)
	send(event.OrderPlaced, "B", placed(10))
	send(event.OrderPlaced, "C", placed(2))
	send(event.OrderCancelled, "C", nil)
	send(event.InventoryAdjusted, "", event.InventoryAdjustedData{SKU: sku, LotID: "L1", Delta: -3, Reason: "missing on a count"})

	drainCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	got, err := outboundcheck.Drain(drainCtx, c, shopURL, outboundcheck.DrainOptions{Settled: outboundcheck.Published(db)})
	if err != nil {
		t.Fatalf("drain: %v (%d received)", err, len(got))
	}
	rep, err := outboundcheck.Check(ctx, db, got, outboundcheck.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Rows == 0 {
		t.Fatalf("outbound check: %q (%d rows, %d received)", rep.Problems(), rep.Rows, rep.Received)
	}

	// Each entity's messages, one copy each, in seq order.
	byEntity := map[string][]outbound.Message{}
	seen := map[string]bool{}
	for _, m := range got {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		var msg outbound.Message
		if err := json.Unmarshal(m.Body, &msg); err != nil {
			t.Fatal(err)
		}
		byEntity[msg.Entity] = append(byEntity[msg.Entity], msg)
	}
	for e, ms := range byEntity {
		bySeq := func(a, b outbound.Message) int { return int(a.Seq - b.Seq) }
		if fifo && !slices.IsSortedFunc(ms, bySeq) {
			t.Errorf("%s: received out of seq order through the FIFO topic", e)
		}
		slices.SortFunc(ms, bySeq)
	}
	kinds := func(entity string, only ...outbound.Kind) []outbound.Kind {
		var out []outbound.Kind
		for _, m := range byEntity[entity] {
			if len(only) == 0 || slices.Contains(only, m.Kind) {
				out = append(out, m.Kind)
			}
		}
		return out
	}
	status := func(entity string) (first, last outbound.OrderStatusData) {
		t.Helper()
		ms := byEntity[entity]
		if len(ms) == 0 {
			t.Fatalf("%s: no message", entity)
		}
		for i, m := range []outbound.Message{ms[0], ms[len(ms)-1]} {
			d := &first
			if i == 1 {
				d = &last
			}
			if m.Kind != outbound.OrderStatusChanged || json.Unmarshal(m.Data, d) != nil {
				t.Fatalf("%s: %s, want order.status_changed", entity, m.Kind)
			}
		}
		return first, last
	}

	a, c1 := run+"-A", run+"-C"
	if k := kinds(a); len(slices.Compact(slices.Clone(k))) != 1 || k[0] != outbound.OrderStatusChanged {
		t.Errorf("order A: %v, want order.status_changed only", k)
	}
	if first, last := status(a); first.From != nil || last.To != "shipped" || !last.Paid {
		t.Errorf("order A: first from %v, last %+v; want from null, and shipped and paid at last", first.From, last)
	}
	refused := false
	for _, m := range byEntity[run+"-B"] {
		var d outbound.OrderRefusedData
		if m.Kind == outbound.OrderRefused && json.Unmarshal(m.Data, &d) == nil && d.Reason == "ERR_SHORTAGE" {
			refused = true
		}
	}
	if !refused {
		t.Errorf("order B: %v, want an order.refused for ERR_SHORTAGE", kinds(run+"-B"))
	}
	if _, last := status(c1); last.To != "cancelled" {
		t.Errorf("order C: last %+v, want cancelled", last)
	}
	skuEntity := event.SKUEntityPrefix + sku
	levels := kinds(skuEntity, outbound.StockLow, outbound.StockOut, outbound.StockBack)
	if want := []outbound.Kind{outbound.StockLow, outbound.StockBack, outbound.StockOut}; !slices.Equal(levels, want) {
		t.Errorf("SKU %s: level messages %v, want %v (all: %v)", sku, levels, want, kinds(skuEntity))
	}
	if !slices.Contains(kinds(skuEntity), outbound.StockChanged) {
		t.Errorf("SKU %s: %v, no stock.changed", sku, kinds(skuEntity))
	}
	var last outbound.StockLevelData
	if ms := byEntity[skuEntity]; len(ms) > 0 {
		for _, m := range ms {
			if m.Kind == outbound.StockOut {
				if err := json.Unmarshal(m.Data, &last); err != nil {
					t.Fatalf("stock.out data: %v", err)
				}
			}
		}
	}
	if last.AvailableToShip != 0 || last.Level != outbound.LevelOut {
		t.Errorf("SKU %s: stock.out %+v, want 0 available", sku, last)
	}
}
