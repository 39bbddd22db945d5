package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/domain"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/ledger"
	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/order"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// outboxRig is a turn and a processor on FIFO queues (the results' order is kept), with
// both DLQs wired as the order-worker wires them.
type outboxRig struct {
	t      *testing.T
	prefix string
	rc     redis.UniversalClient
	sqs    *sqs.Client
	queues testenv.Queues
	turns  *lockhandoff.Handoff
	proc   *order.Processor
}

func newOutboxRig(t *testing.T, sku string) *outboxRig {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	db := testenv.Postgres(t)
	seed(t, db, []stock.SKU{{SKU: sku, Version: 1, Lots: []stock.Lot{onHand(sku+"-L1", 1, 100, "2027-01-01")}}})
	c := testenv.SQS(t)
	r := &outboxRig{t: t, prefix: prefix, rc: rc, sqs: c, queues: testenv.NewFIFOQueues(t, c, 30)}
	pub, err := queue.NewPublisher(queue.PublisherConfig{Client: c, QueueURL: r.queues.Results.URL, Keys: domain.ResultKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Stop(context.Background()) })
	led, err := ledger.New(ledger.Config{Redis: rc, Prefix: prefix, Loader: inventorydb.PGLoader{DB: db}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	dlqTo := func(url string) order.DeadLetter {
		return func(ctx context.Context, body []byte, reason string, attrs map[string]string) error {
			n++
			return queue.DeadLetter(ctx, c, url, body, reason, attrs, queue.Keys{Group: "dead", Dedup: fmt.Sprintf("dl-%d-%d", time.Now().UnixNano(), n)})
		}
	}
	r.proc, err = order.New(order.Config{Redis: rc, Ledger: led, Publisher: pub, Registerer: prometheus.NewRegistry(), Prefix: prefix,
		DeadLetter: dlqTo(r.queues.Orders.DLQURL), ResultsDeadLetter: dlqTo(r.queues.Results.DLQURL)})
	if err != nil {
		t.Fatal(err)
	}
	r.turns, err = lockhandoff.New(lockhandoff.Config{Redis: rc, Prefix: prefix, LockTTL: 2 * time.Second,
		SweepInterval: 200 * time.Millisecond, Handler: r.proc, NeverQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.turns.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.turns.Stop(context.Background()); cancel() })
	return r
}

func (r *outboxRig) submit(ev event.Order) {
	r.t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.turns.Submit(context.Background(), ev.LCID, body); err != nil {
		r.t.Fatal(err)
	}
}

// receive reads url until want messages arrived (or a minute passed), in the order SQS
// gives them, deleting each.
func (r *outboxRig) receive(url string, want int) []receivedMessage {
	r.t.Helper()
	var got []receivedMessage
	for deadline := time.Now().Add(time.Minute); len(got) < want && time.Now().Before(deadline); {
		out, err := r.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, m := range out.Messages {
			attrs := map[string]string{}
			for k, v := range m.MessageAttributes {
				attrs[k] = aws.ToString(v.StringValue)
			}
			got = append(got, receivedMessage{body: aws.ToString(m.Body), attrs: attrs})
			if _, err := r.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				r.t.Fatal(err)
			}
		}
	}
	return got
}

type receivedMessage struct {
	body  string
	attrs map[string]string
}

// A result the results queue refuses as the sender's fault (U+FFFF, which SQS cannot
// carry) at the head of an entity's results list, followed by twelve good ones: the entity's
// next events run, the twelve and theirs reach the results queue in order, the refused
// one is in the results DLQ with ERR_RESULT_REFUSED and SQS's code (its body quoted,
// since the DLQ refuses it as it is too), and the results list is empty. Before, every publish
// of the results list failed on its head, and the entity's turn was wedged for good.
func TestRefusedResultIsDeadLetteredAndTheOutboxDrains(t *testing.T) {
	t.Parallel()
	run := testenv.ID()
	sku, lcid := "OB-SKU-"+run, "OB-"+run
	r := newOutboxRig(t, sku)
	ctx := context.Background()

	result := func(id, detail string) string {
		b, err := domain.Marshal(event.Result{EventID: id, Entity: lcid, LCID: lcid, Type: event.OrderPlaced,
			Outcome: event.Rejected, Reason: "ERR_TEST", Detail: detail, ProcessedAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bad := result("bad-"+run, "holds \uffff, which SQS refuses")
	if !strings.Contains(bad, "\uffff") {
		t.Fatalf("the refused result does not hold U+FFFF as it is: %s", bad)
	}
	outbox := []any{bad}
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("old-%02d-%s", i, run)
		outbox = append(outbox, result(id, "fine"))
		want = append(want, id)
	}
	rc := r.rc
	outboxKey := lockhandoff.Key(r.prefix, lcid, "outbox")
	if err := rc.RPush(ctx, outboxKey, outbox...).Err(); err != nil {
		t.Fatal(err)
	}

	placed := event.Order{EventID: "placed-" + run, Type: event.OrderPlaced, LCID: lcid, OccurredAt: time.Now().UTC(),
		Data: json.RawMessage(`{"mode":"ship","target_date":"2026-12-01","lines":[{"line_id":"1","sku":"` + sku + `","qty":2}]}`)}
	paid := event.Order{EventID: "paid-" + run, Type: event.PaymentConfirmed, LCID: lcid, OccurredAt: time.Now().UTC()}
	r.submit(placed)
	r.submit(paid)
	want = append(want, placed.EventID, paid.EventID)

	var got []string
	for _, m := range r.receive(r.queues.Results.URL, len(want)) {
		var res event.Result
		if err := json.Unmarshal([]byte(m.body), &res); err != nil {
			t.Fatalf("result is not JSON: %v", err)
		}
		got = append(got, res.EventID)
		if res.EventID == paid.EventID && (res.Outcome != event.Applied || res.Order == nil || !res.Order.Paid) {
			t.Errorf("the entity's next event: %s/%s", res.Outcome, res.Reason)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results queue got %v, want %v", got, want)
	}

	dead := r.receive(r.queues.Results.DLQURL, 1)
	if len(dead) != 1 {
		t.Fatalf("results DLQ holds %d messages, want the refused result", len(dead))
	}
	reason := dead[0].attrs[queue.AttrDLQReason]
	if !strings.HasPrefix(reason, order.ReasonResultRefused) || !strings.Contains(reason, "InvalidMessageContents") {
		t.Errorf("DLQ reason %q, want %s naming SQS's code", reason, order.ReasonResultRefused)
	}
	if body, err := strconv.Unquote(dead[0].body); err != nil || body != bad {
		t.Errorf("DLQ body %.120q does not quote the refused result (%v)", dead[0].body, err)
	}
	if n, _ := strconv.Atoi(dead[0].attrs[order.AttrOriginalBytes]); n != len(bad) {
		t.Errorf("%s %q, want %d", order.AttrOriginalBytes, dead[0].attrs[order.AttrOriginalBytes], len(bad))
	}
	if n, err := rc.LLen(ctx, outboxKey).Result(); err != nil || n != 0 {
		t.Fatalf("outbox holds %d entries (%v), want none", n, err)
	}
}
