package outboundcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/testenv"
)

// message builds a valid outbound message of kind k, entity and seq.
func message(t testing.TB, id string, k outbound.Kind, entity string, seq int64) []byte {
	t.Helper()
	m := outbound.Message{ID: id, Kind: k, Entity: entity, Seq: seq, OccurredAt: time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC),
		CausedBy: outbound.Cause{EventID: "evt-" + id[:8], Type: event.OrderPlaced}}
	var data any
	switch k {
	case outbound.OrderStatusChanged:
		m.LCID = entity
		data = outbound.OrderStatusData{To: "placed", Lines: []event.SnapshotLine{{LineID: "1", SKU: "TEA-1", Qty: 1}},
			Changed: []string{"status", "allocation", "paid", "lines"}}
	case outbound.OrderRefused:
		m.LCID = entity
		data = outbound.OrderRefusedData{Reason: "ERR_SHORTAGE", Status: "rejected"}
	case outbound.StockChanged:
		m.SKU = strings.TrimPrefix(entity, event.SKUEntityPrefix)
		data = outbound.StockData{Version: 3, Sellable: 4, AvailableToShip: 4, AsOf: "2026-12-02", Level: outbound.LevelLow, Threshold: 10}
	default:
		m.SKU = strings.TrimPrefix(entity, event.SKUEntityPrefix)
		data = outbound.StockLevelData{AvailableToShip: 4, Threshold: 10, Level: outbound.LevelLow, Previous: outbound.LevelOK, AsOf: "2026-12-02"}
	}
	var err error
	if m.Data, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbound.Validate(b); err != nil {
		t.Fatalf("the test's own message breaks its schema: %v", err)
	}
	return b
}

func uuid(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

// A topic with a queue subscribed raw; outbox rows of three orders and a SKU, published by
// the test as the relay would, but: one row never published (unpublished), one marked
// published but never sent, a SKU's seq 1 never sent (so its seq 2 leaves a gap), one
// message sent twice, one sent that no row holds, and one row's body sent broken. Drain
// empties the queue and Check finds each, by name; the report fails.
func TestCheckFindsEachProblem(t *testing.T) {
	db := testenv.Postgres(t)
	sn, sq := testenv.SNS(t), testenv.SQS(t)
	ctx := context.Background()
	topic := testenv.Topic(t, sn)
	qname := testenv.Name(t)
	qu, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(qname)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: qu.QueueUrl}) })
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topic, QueueURL: aws.ToString(qu.QueueUrl), Raw: true}); err != nil {
		t.Fatal(err)
	}

	type r struct {
		n         int
		kind      outbound.Kind
		entity    string
		seq       int64
		published bool
	}
	rows := []r{
		{1, outbound.OrderStatusChanged, "LC-A", 1, true}, {2, outbound.OrderStatusChanged, "LC-A", 2, true},
		{3, outbound.OrderRefused, "LC-A", 3, true},
		{4, outbound.OrderStatusChanged, "LC-B", 1, false}, // never published
		{5, outbound.OrderStatusChanged, "LC-C", 1, true},  // marked published, never sent
		{6, outbound.StockChanged, "sku:TEA-1", 1, true},   // never sent: a gap before seq 2
		{7, outbound.StockLow, "sku:TEA-1", 2, true},
	}
	for _, w := range rows {
		if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body, published_at) VALUES (?, ?, ?, ?, ?, CASE WHEN ? THEN now() END)`,
			uuid(w.n), w.kind, w.entity, w.seq, string(message(t, uuid(w.n), w.kind, w.entity, w.seq)), w.published).Error; err != nil {
			t.Fatal(err)
		}
	}
	broken := bytes.Replace(message(t, uuid(3), outbound.OrderRefused, "LC-A", 3), []byte(`"reason":"ERR_SHORTAGE"`), []byte(`"reason":7`), 1)
	send := [][]byte{
		message(t, uuid(1), outbound.OrderStatusChanged, "LC-A", 1),
		message(t, uuid(1), outbound.OrderStatusChanged, "LC-A", 1), // a copy
		message(t, uuid(2), outbound.OrderStatusChanged, "LC-A", 2),
		broken,
		message(t, uuid(7), outbound.StockLow, "sku:TEA-1", 2),
		message(t, uuid(99), outbound.OrderStatusChanged, "LC-Z", 1), // committed nowhere
	}
	for _, b := range send {
		if _, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(string(b))}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Drain(ctx, sq, aws.ToString(qu.QueueUrl), DrainOptions{Quiet: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, db, got, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	rep.Print(&text)
	t.Log("\n" + text.String())

	if rep.Received != len(send) || rep.Distinct != 5 || rep.Rows != len(rows) || rep.Unpublished != 1 {
		t.Errorf("received %d (distinct %d), rows %d (unpublished %d); want %d (5), %d (1)",
			rep.Received, rep.Distinct, rep.Rows, rep.Unpublished, len(send), len(rows))
	}
	want := map[string]struct {
		f    Finding
		want []string
	}{
		"missing":    {rep.Missing, []string{"LC-B#1 " + uuid(4) + " (unpublished)", "LC-C#1 " + uuid(5) + " (published)", "sku:TEA-1#1 " + uuid(6) + " (published)"}},
		"unknown":    {rep.Unknown, []string{"LC-Z#1 " + uuid(99)}},
		"gaps":       {rep.Gaps, []string{"sku:TEA-1: seq 1 not received"}},
		"duplicates": {rep.Duplicates, []string{uuid(1) + " x2"}},
	}
	for what, w := range want {
		if w.f.Count != len(w.want) || !slices.Equal(w.f.Sample, w.want) {
			t.Errorf("%s: %+v, want %q", what, w.f, w.want)
		}
	}
	if rep.Invalid.Count != 1 || !strings.HasPrefix(rep.Invalid.Sample[0], uuid(3)+": ") {
		t.Errorf("invalid: %+v, want %s's broken body", rep.Invalid, uuid(3))
	}
	if rep.Kinds[outbound.OrderStatusChanged] != 3 || rep.Kinds[outbound.OrderRefused] != 1 || rep.Kinds[outbound.StockLow] != 1 ||
		rep.RowKinds[outbound.OrderStatusChanged] != 4 {
		t.Errorf("kinds received %v, rows %v", rep.Kinds, rep.RowKinds)
	}
	if rep.OK() || len(rep.Problems()) != 4 || !strings.Contains(text.String(), "FAIL:") {
		t.Errorf("the report passes or names %d problems: %q", len(rep.Problems()), rep.Problems())
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"missing":{"count":3`) {
		t.Errorf("JSON %s, %v", b, err)
	}
}

// Drain does not end before Settled said true, however quiet the queue is meanwhile:
// Settled publishes one message on each of its first five calls, and Drain gets all five
// and the queue's copy of nothing else; Check then finds them all, in order, and passes.
func TestDrainWaitsUntilSettled(t *testing.T) {
	db := testenv.Postgres(t)
	sn, sq := testenv.SNS(t), testenv.SQS(t)
	ctx := context.Background()
	topic := testenv.Topic(t, sn)
	qu, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(testenv.Name(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: qu.QueueUrl}) })
	// Not raw: Drain unwraps the SNS notification.
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topic, QueueURL: aws.ToString(qu.QueueUrl)}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	settled := func(ctx context.Context) (bool, error) {
		calls++
		if calls > 5 {
			return true, nil
		}
		b := message(t, uuid(calls), outbound.StockChanged, "sku:TEA-2", int64(calls))
		if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body, published_at) VALUES (?, ?, ?, ?, ?, now())`,
			uuid(calls), outbound.StockChanged, "sku:TEA-2", calls, string(b)).Error; err != nil {
			return false, err
		}
		_, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(topic), Message: aws.String(string(b))})
		return false, err
	}
	got, err := Drain(ctx, sq, aws.ToString(qu.QueueUrl), DrainOptions{Quiet: time.Millisecond, Settled: settled})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(ctx, db, got, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Distinct != 5 || rep.Kinds[outbound.StockChanged] != 5 {
		t.Fatalf("%d received, %d distinct, problems %q; want the five settled published", rep.Received, rep.Distinct, rep.Problems())
	}
}

// Check's comparison alone (no service): every row received once, in any order, passes;
// copies are counted and still pass.
func TestCompareCleanAndCopies(t *testing.T) {
	var rows []row
	var got []Message
	for i := range 6 {
		e := fmt.Sprintf("LC-%d", i%2)
		rows = append(rows, row{MessageID: uuid(i), Kind: outbound.OrderStatusChanged, Entity: e, Seq: int64(i/2 + 1), Published: true})
		got = append(got, Parse(message(t, uuid(i), outbound.OrderStatusChanged, e, int64(i/2+1))))
	}
	slices.Reverse(got)
	if rep := compare(rows, got); !rep.OK() || rep.Duplicates.Count != 0 || rep.Distinct != 6 {
		t.Fatalf("clean: %+v", rep)
	}
	got = append(got, got[0], got[0], got[3])
	if rep := compare(rows, got); !rep.OK() || rep.Duplicates.Count != 3 || len(rep.Duplicates.Sample) != 2 || rep.Received != 9 {
		t.Fatalf("copies: %+v", rep)
	}
}

// Rows written before CheckOptions.Since are held to nothing: not missing when not
// received, no gap before a later seq of their entity; a message of one received is
// counted apart (Earlier), not in Kinds. A row after Since not received is still missing.
func TestCompareSince(t *testing.T) {
	rows := []row{
		{MessageID: uuid(1), Kind: outbound.StockChanged, Entity: "sku:A", Seq: 1, Published: true, Earlier: true},
		{MessageID: uuid(2), Kind: outbound.StockChanged, Entity: "sku:A", Seq: 2, Published: true, Earlier: true},
		{MessageID: uuid(3), Kind: outbound.StockLow, Entity: "sku:A", Seq: 3, Published: true},
		{MessageID: uuid(4), Kind: outbound.StockOut, Entity: "sku:A", Seq: 4, Published: true},
	}
	got := []Message{Parse(message(t, uuid(2), outbound.StockChanged, "sku:A", 2)), Parse(message(t, uuid(3), outbound.StockLow, "sku:A", 3))}
	rep := compare(rows, got)
	if rep.Rows != 2 || rep.Earlier != 1 || rep.Kinds[outbound.StockChanged] != 0 || rep.Kinds[outbound.StockLow] != 1 || rep.Gaps.Count != 0 ||
		rep.Missing.Count != 1 || !strings.HasPrefix(rep.Missing.Sample[0], "sku:A#4 ") {
		t.Fatalf("%+v: want sku:A#4 missing alone, one earlier message apart", rep)
	}
}

// Parse takes whatever a queue holds (a consumer's queue is open to what the topic's
// publishers send): it never panics, a body that is not a valid message is Invalid, and an
// SNS notification around a body (not itself one, in
// valid UTF-8 as a JSON string must be) parses as the body itself.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"id":"x","kind":"stock.out","entity":"sku:A","seq":1}`))
	f.Add([]byte(`{"Type":"Notification","TopicArn":"arn:aws:sns:us-east-1:0:t","Message":"{\"kind\":\"order.refused\"}"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		m := Parse(body)
		if m.Invalid == "" && outbound.Validate(m.Body) != nil {
			t.Fatalf("%q: not marked invalid", body)
		}
		wrapped, _ := json.Marshal(map[string]string{"Type": "Notification", "TopicArn": "arn:aws:sns:us-east-1:0:t", "Message": string(body)})
		// One envelope is unwrapped: a body that is itself a notification stays wrapped once.
		if w := Parse(wrapped); utf8.Valid(body) && bytes.Equal(unwrapSNS(body), body) &&
			(w.ID != m.ID || w.Seq != m.Seq || w.Invalid != m.Invalid) {
			t.Fatalf("%q: wrapped %+v, raw %+v", body, w, m)
		}
	})
}
