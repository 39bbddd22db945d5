package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/aws/topics"
	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/testenv"
)

// testMessage is a valid message of entity's seq: order.refused for an order, stock.changed
// for a SKU.
func testMessage(t testing.TB, entity string, seq int64) Message {
	t.Helper()
	m := Message{ID: uuid.NewString(), Entity: entity, Seq: seq, OccurredAt: time.Now().UTC().Truncate(time.Millisecond),
		CausedBy: Cause{EventID: fmt.Sprintf("evt-%s-%d", entity, seq), Type: event.OrderPlaced}}
	var data any
	if sku, ok := strings.CutPrefix(entity, event.SKUEntityPrefix); ok {
		m.Kind, m.SKU = StockChanged, sku
		data = StockData{Version: seq, Sellable: 40, AvailableToShip: 38, AsOf: "2026-12-02", Level: LevelOK, Threshold: 10}
	} else {
		m.Kind, m.LCID = OrderRefused, entity
		data = OrderRefusedData{Reason: "ERR_SHORTAGE", Status: "rejected"}
	}
	var err error
	if m.Data, err = json.Marshal(data); err != nil {
		t.Fatal(err)
	}
	return m
}

// insertRows writes perEntity messages of each entity into the outbox, the entities' rows
// interleaved as concurrent batches would leave them, and returns them by message id.
func insertRows(t testing.TB, db *gorm.DB, entities []string, perEntity int, firstSeq int64) map[string]Message {
	t.Helper()
	out := map[string]Message{}
	for s := range int64(perEntity) {
		for _, e := range entities {
			m := testMessage(t, e, firstSeq+s)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body) VALUES (?, ?, ?, ?, ?)`,
				m.ID, string(m.Kind), m.Entity, m.Seq, string(b)).Error; err != nil {
				t.Fatal(err)
			}
			out[m.ID] = m
		}
	}
	return out
}

func testEntities(prefix string, n int) []string {
	var es []string
	for i := range n {
		if i%2 == 0 {
			es = append(es, fmt.Sprintf("%s-LC-%d", prefix, i))
		} else {
			es = append(es, fmt.Sprintf("%ssku:%s-SKU %d", "", prefix, i))
		}
	}
	return es
}

func unpublished(t testing.TB, db *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := db.Raw(`SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// subscriber is an SQS queue subscribed to a topic with raw delivery.
type subscriber struct {
	sq  *sqs.Client
	url string
}

// newTopic creates a topic (FIFO or standard) and a queue of the same kind subscribed to it.
func newTopic(t *testing.T, fifo bool) (*sns.Client, string, subscriber) {
	t.Helper()
	sn, sq := testenv.SNS(t), testenv.SQS(t)
	ctx := context.Background()
	name := testenv.Name(t)
	var topicAttrs, queueAttrs map[string]string
	if fifo {
		name += ".fifo"
		topicAttrs, queueAttrs = map[string]string{"FifoTopic": "true"}, map[string]string{"FifoQueue": "true"}
	}
	tp, err := sn.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: topicAttrs})
	if err != nil {
		t.Fatal(err)
	}
	topic := aws.ToString(tp.TopicArn)
	t.Cleanup(func() { sn.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(topic)}) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: queueAttrs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	if _, err := topics.Subscribe(ctx, sn, sq, topics.Spec{TopicARN: topic, QueueURL: aws.ToString(q.QueueUrl), Raw: true}); err != nil {
		t.Fatal(err)
	}
	return sn, topic, subscriber{sq: sq, url: aws.ToString(q.QueueUrl)}
}

// received is what a subscriber got: every message in the order received.
type received struct {
	order []Message
	count map[string]int
}

// receiveAll receives until every id of want arrived, and then until the queue is quiet.
func (s subscriber) receiveAll(t *testing.T, want map[string]Message) received {
	t.Helper()
	ctx := context.Background()
	got := received{count: map[string]int{}}
	missing := func() int {
		n := 0
		for id := range want {
			if got.count[id] == 0 {
				n++
			}
		}
		return n
	}
	quiet := 0
	deadline := time.Now().Add(90 * time.Second)
	for (missing() > 0 || quiet < 2) && time.Now().Before(deadline) {
		out, err := s.sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.url), MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		for _, m := range out.Messages {
			body := []byte(aws.ToString(m.Body))
			if err := Validate(body); err != nil {
				t.Errorf("received a message its schema refuses: %v\n%s", err, body)
			}
			var msg Message
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Fatal(err)
			}
			if k := aws.ToString(m.MessageAttributes[KindAttribute].StringValue); k != string(msg.Kind) {
				t.Errorf("%s: kind attribute %q, want %q", msg.ID, k, msg.Kind)
			}
			if e := aws.ToString(m.MessageAttributes[EntityAttribute].StringValue); e != msg.Entity {
				t.Errorf("%s: entity attribute %q, want %q", msg.ID, e, msg.Entity)
			}
			got.order = append(got.order, msg)
			got.count[msg.ID]++
			if _, err := s.sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := missing(); n > 0 {
		t.Fatalf("%d of %d messages never arrived", n, len(want))
	}
	for id := range got.count {
		if _, ok := want[id]; !ok {
			t.Errorf("received %s, which was never written", id)
		}
	}
	return got
}

// copies counts the messages received more than once.
func (r received) copies() int {
	n := 0
	for _, c := range r.count {
		n += c - 1
	}
	return n
}

// checkOrder fails the test when an entity's messages arrived out of seq order.
func (r received) checkOrder(t *testing.T) {
	t.Helper()
	last := map[string]int64{}
	for _, m := range r.order {
		if m.Seq <= last[m.Entity] {
			t.Errorf("%s: seq %d arrived after seq %d", m.Entity, m.Seq, last[m.Entity])
		}
		last[m.Entity] = m.Seq
	}
}

func publishedTotal(t testing.TB, m *RelayMetrics) float64 {
	var n float64
	for _, k := range Kinds {
		n += metricValue(t, m.Published.WithLabelValues(string(k)))
	}
	return n
}

func newTestRelay(t *testing.T, db *gorm.DB, pub SNSPublisher, topic string, roundMax int) *Relay {
	t.Helper()
	r, err := NewRelay(RelayConfig{DB: db, SNS: pub, TopicARN: topic, Poll: 50 * time.Millisecond, Publishers: 4,
		RoundMax: roundMax, BackoffMax: time.Second, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runRelay runs r until the test ends.
func runRelay(t *testing.T, r *Relay) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// Every row reaches a subscribed queue, its body valid against its kind's schema, with
// its kind and entity as attributes, and is marked published; on a FIFO topic each
// entity's messages arrive in seq order. Rounds of 25 rows: most rounds are full.
func TestRelayPublishesEveryRow(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
			db := testenv.Postgres(t)
			sn, topic, sub := newTopic(t, fifo)
			want := insertRows(t, db, testEntities("P", 12), 8, 1)
			r := newTestRelay(t, db, sn, topic, 25)
			runRelay(t, r)
			r.Kick()
			testenv.WaitFor(t, 60*time.Second, "every row to be published", func() bool { return unpublished(t, db) == 0 })
			got := sub.receiveAll(t, want)
			if fifo {
				got.checkOrder(t)
				if got.copies() != 0 {
					t.Errorf("%d copies on a FIFO topic", got.copies())
				}
			}
			if n := publishedTotal(t, r.Metrics()); n != float64(len(want)) {
				t.Errorf("junban_outbox_published_total = %v, want %d", n, len(want))
			}
			var lag dto.Metric
			if err := r.Metrics().Lag.Write(&lag); err != nil || lag.GetHistogram().GetSampleCount() != uint64(len(want)) {
				t.Errorf("lag histogram: %d samples (%v), want %d", lag.GetHistogram().GetSampleCount(), err, len(want))
			}
			if n := metricValue(t, r.Metrics().Rounds.WithLabelValues(roundPublished)); n < float64(len(want)/25) {
				t.Errorf("%v published rounds, want at least %d", n, len(want)/25)
			}
		})
	}
}

// flakySNS forwards PublishBatch to SNS but refuses some entries itself (they never reach
// SNS), answers some calls with an error after SNS took them (an answer lost: the relay
// killed before it heard back), and fails some calls without forwarding them.
type flakySNS struct {
	inner SNSPublisher
	calls atomic.Int64
	// refuse is true for the entry whose message it refuses, the first time only.
	refuse func(body string) bool
	// lose and fail are the call numbers (1, 2, ...) answered with an error after SNS took
	// them, and failed without reaching SNS.
	lose, fail map[int64]bool

	mu      sync.Mutex
	refused map[string]bool
}

func (f *flakySNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	n := f.calls.Add(1)
	if f.fail[n] {
		return nil, errors.New("flaky: connection reset")
	}
	fwd := *in
	fwd.PublishBatchRequestEntries = nil
	var failed []string
	for _, e := range in.PublishBatchRequestEntries {
		body := aws.ToString(e.Message)
		f.mu.Lock()
		refuse := f.refuse != nil && f.refuse(body) && !f.refused[body]
		if refuse {
			if f.refused == nil {
				f.refused = map[string]bool{}
			}
			f.refused[body] = true
		}
		f.mu.Unlock()
		if refuse {
			failed = append(failed, aws.ToString(e.Id))
			continue
		}
		fwd.PublishBatchRequestEntries = append(fwd.PublishBatchRequestEntries, e)
	}
	out := &sns.PublishBatchOutput{}
	if len(fwd.PublishBatchRequestEntries) > 0 {
		var err error
		if out, err = f.inner.PublishBatch(ctx, &fwd, opts...); err != nil {
			return nil, err
		}
	}
	for _, id := range failed {
		out.Failed = append(out.Failed, snstypesFailed(id))
	}
	if f.lose[n] {
		return nil, errors.New("flaky: answer lost")
	}
	return out, nil
}

// A relay whose calls fail or lose SNS's answer mid-round marks none of their rows: the
// next rounds publish them again, so the subscriber gets every row at least once, and the
// copies of what SNS took before the answer was lost. (Fails with the relay marking every
// row it read published, whatever SNS answered: the rows of the failed call are lost.)
func TestRelayPublishesAgainWhatALostAnswerLeft(t *testing.T) {
	db := testenv.Postgres(t)
	sn, topic, sub := newTopic(t, false)
	want := insertRows(t, db, testEntities("K", 30), 3, 1)
	flaky := &flakySNS{inner: sn, lose: map[int64]bool{2: true, 5: true}, fail: map[int64]bool{3: true}}
	r := newTestRelay(t, db, flaky, topic, 500)
	ctx := context.Background()
	for i := 0; unpublished(t, db) > 0; i++ {
		if i == 50 {
			t.Fatalf("%d rows still unpublished after 50 rounds", unpublished(t, db))
		}
		r.round(ctx)
	}
	got := sub.receiveAll(t, want)
	if got.copies() == 0 {
		t.Fatal("no copy received: the lost answers did not happen")
	}
	// The relay counts what it heard SNS take: each row once, the copies it never heard of not.
	if n := publishedTotal(t, r.Metrics()); n != float64(len(want)) {
		t.Errorf("junban_outbox_published_total = %v, want %d", n, len(want))
	}
	if n := metricValue(t, r.Metrics().PublishFailures); n == 0 {
		t.Error("junban_outbox_publish_failures_total stayed 0")
	}
}

// When SNS refuses an entry, its entity's later rows wait for the next round: on a FIFO
// topic an entity's messages never overtake each other. (Fails with an entity's later rows
// published in the round its earlier one was refused.)
func TestRelayKeepsAnEntitysOrderPastARefusedEntry(t *testing.T) {
	db := testenv.Postgres(t)
	sn, topic, sub := newTopic(t, true)
	want := insertRows(t, db, testEntities("O", 6), 5, 1)
	flaky := &flakySNS{inner: sn, refuse: func(body string) bool {
		return strings.Contains(body, `"seq":2,`) || strings.Contains(body, `"seq":4,`)
	}}
	r := newTestRelay(t, db, flaky, topic, 500)
	ctx := context.Background()
	for i := 0; unpublished(t, db) > 0; i++ {
		if i == 20 {
			t.Fatalf("%d rows still unpublished after 20 rounds", unpublished(t, db))
		}
		r.round(ctx)
	}
	got := sub.receiveAll(t, want)
	got.checkOrder(t)
	if n := metricValue(t, r.Metrics().Rounds.WithLabelValues(roundPartial)); n == 0 {
		t.Error("no partial round: no entry was refused")
	}
}

// blockingSNS holds its first call until released, having said it started.
type blockingSNS struct {
	inner            SNSPublisher
	once             sync.Once
	started, release chan struct{}
}

func (b *blockingSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	b.once.Do(func() { close(b.started); <-b.release })
	return b.inner.PublishBatch(ctx, in, opts...)
}

// Two relays on one outbox: while one is in its round, the other's round finds the lock
// taken and publishes nothing, so no row is published twice. (Fails with the advisory lock
// taken out of the round: the second relay publishes every row the first is publishing.)
func TestTwoRelaysPublishOneAtATime(t *testing.T) {
	db := testenv.Postgres(t)
	sn, topic, sub := newTopic(t, false)
	want := insertRows(t, db, testEntities("T", 10), 3, 1)
	slow := &blockingSNS{inner: sn, started: make(chan struct{}), release: make(chan struct{})}
	a := newTestRelay(t, db, slow, topic, 500)
	b := newTestRelay(t, db, sn, topic, 500)
	ctx := context.Background()
	done := make(chan roundResult)
	go func() { done <- a.round(ctx) }()
	<-slow.started
	rb := b.round(ctx)
	close(slow.release)
	ra := <-done
	if rb.result != roundLocked {
		t.Errorf("second relay's round: %s (%d published), want locked", rb.result, rb.published)
	}
	if ra.result != roundPublished || ra.published != len(want) {
		t.Errorf("first relay's round: %s, %d published, want all %d", ra.result, ra.published, len(want))
	}
	got := sub.receiveAll(t, want)
	if got.copies() != 0 {
		t.Errorf("%d rows published twice", got.copies())
	}
	if n := publishedTotal(t, a.Metrics()) + publishedTotal(t, b.Metrics()); n != float64(len(want)) {
		t.Errorf("published %v in all, want %d", n, len(want))
	}
}

// PostgreSQL out of reach for some seconds while rows come in: the relay's rounds fail, it
// keeps trying, and afterwards every row is published and received, none lost. (Fails with
// Run returning at the first failed round.)
func TestRelaySurvivesPostgresOutage(t *testing.T) {
	dbURL := testenv.PostgresURL(t)
	db := openDB(t, dbURL)
	px := testenv.StartProxy(t, hostOf(t, dbURL))
	relayDB := openDB(t, strings.Replace(dbURL, hostOf(t, dbURL), px.Addr(), 1))
	sn, topic, sub := newTopic(t, false)
	r := newTestRelay(t, relayDB, sn, topic, 50)
	runRelay(t, r)
	want := insertRows(t, db, testEntities("A", 10), 3, 1)
	r.Kick()
	testenv.WaitFor(t, 30*time.Second, "the first rows to be published", func() bool { return unpublished(t, db) == 0 })
	px.Down()
	for k, v := range insertRows(t, db, testEntities("A", 10), 3, 4) {
		want[k] = v
	}
	r.Kick()
	testenv.WaitFor(t, 30*time.Second, "a failed round", func() bool {
		return metricValue(t, r.Metrics().Rounds.WithLabelValues(roundFailed)) >= 2
	})
	if n := unpublished(t, db); n != 30 {
		t.Fatalf("%d unpublished rows while PostgreSQL was out of reach, want 30", n)
	}
	px.Up()
	testenv.WaitFor(t, 60*time.Second, "every row to be published", func() bool { return unpublished(t, db) == 0 })
	sub.receiveAll(t, want)
}
