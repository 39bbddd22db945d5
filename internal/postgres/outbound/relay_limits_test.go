package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/awslimits"
)

// limitedSNS is a client of the test SNS whose requests pass through an awslimits proxy,
// so the emulator refuses what AWS would.
func limitedSNS(t *testing.T, l awslimits.Limits) (*sns.Client, *awslimits.Proxy) {
	t.Helper()
	px, url := awslimits.Start(t, testenv.SNSEndpoint(t), l)
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(testenv.SQSConfig(t).Region))
	if err != nil {
		t.Fatal(err)
	}
	return sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(url) }), px
}

// partitionOf is the relay partition (of n) that publishes entity's rows.
func partitionOf(entity string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(entity))
	return int(h.Sum32() % uint32(n))
}

// insertWhole writes m into the outbox, its body as json.Marshal makes it.
func insertWhole(t testing.TB, db *gorm.DB, m Message) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body) VALUES (?, ?, ?, ?, ?)`,
		m.ID, string(m.Kind), m.Entity, m.Seq, string(b)).Error; err != nil {
		t.Fatal(err)
	}
}

// bigMessage is an order.refused of the order lcid whose detail makes its body about size
// bytes, with s in its detail.
func bigMessage(t testing.TB, lcid string, seq int64, size int, s string) Message {
	t.Helper()
	m := testMessage(t, lcid, seq)
	d, err := json.Marshal(OrderRefusedData{Reason: "ERR_SHORTAGE", Status: "rejected", Detail: s + strings.Repeat("x", max(0, size-400))})
	if err != nil {
		t.Fatal(err)
	}
	m.Data = d
	return m
}

// rowsLeft counts the rows neither published nor parked, and those of them in partition p (of n).
func rowsLeft(t testing.TB, db *gorm.DB, p, n int) (all, inP int) {
	t.Helper()
	var es []string
	if err := db.Raw(`SELECT entity FROM outbox WHERE published_at IS NULL AND parked_at IS NULL`).Scan(&es).Error; err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if partitionOf(e, n) == p {
			inP++
		}
	}
	return len(es), inP
}

// Twelve rows of 33 KB in one partition, first in the outbox, among 3,000 small rows: a
// PublishBatch of ten of them would be 330 KB, which AWS refuses (BatchRequestTooLong).
// Batches sized in bytes publish every row, none refused. (Fails with batches counted in
// entries and no split: the big rows' partition never publishes again, and once its rows
// fill the 500-row window, neither do the others; with entries counted and the split, the
// proxy refuses batches as too long.)
func TestRelayPublishesPastAnOversizedBatch(t *testing.T) {
	db := testenv.Postgres(t)
	pub, px := limitedSNS(t, awslimits.Limits{})
	topic := testenv.Topic(t, pub)
	const publishers = 4
	var big []string
	for i := 0; len(big) < 12; i++ {
		if e := fmt.Sprintf("BIG-LC-%d", i); partitionOf(e, publishers) == 0 {
			big = append(big, e)
		}
	}
	for _, e := range big {
		insertWhole(t, db, bigMessage(t, e, 1, 33_000, ""))
	}
	insertRows(t, db, testEntities("S", 300), 10, 1)
	r := newTestRelay(t, db, pub, topic, 500)
	ctx := context.Background()
	for i := 0; ; i++ {
		all, inBig := rowsLeft(t, db, 0, publishers)
		if all == 0 {
			break
		}
		if i == 40 {
			t.Fatalf("after 40 rounds %d rows unpublished, %d of them outside the big rows' partition; "+
				"%d batches refused as too long", all, all-inBig, px.Refused("BatchRequestTooLong"))
		}
		r.round(ctx)
	}
	// Sized in bytes, no batch is too long; splitting what SNS refused would publish
	// them too, a call later.
	if n := px.Refused("BatchRequestTooLong"); n != 0 {
		t.Errorf("the proxy refused %d batches as too long", n)
	}
	if n := publishedTotal(t, r.Metrics()); n != 3012 {
		t.Errorf("junban_outbox_published_total = %v, want 3012", n)
	}
}

// Rows SNS can never take, all in one partition and first in the outbox, among healthy
// rows, on a FIFO topic: one too large alone (parked before any call), one holding U+FFFF
// (parked before any call), and one SNS refuses only when it arrives (the proxy's limit set
// below the relay's, so the relay's batch comes back too long, is split, and the row sent
// alone is refused too). Each is parked with its reason, counted, logged
// and shown in ReadStats; every other row, the bad entities' later rows too, is published
// and arrives in seq order, with a window of 40 rows a round. (Fails with a call refused
// for a message left to fail every round: the refused row and its batch-mates never
// publish; and with no split: the too-long batch is sent again every round.)
func TestRelayParksWhatSNSCanNeverTake(t *testing.T) {
	db := testenv.Postgres(t)
	_, topic, sub := newTopic(t, true)
	pub, px := limitedSNS(t, awslimits.Limits{SNSMax: 150_000})
	const publishers = 4
	var bad []string
	for i := 0; len(bad) < 3; i++ {
		if e := fmt.Sprintf("BAD-LC-%d", i); partitionOf(e, publishers) == 0 {
			bad = append(bad, e)
		}
	}
	want := map[string]Message{}
	for i, m := range []Message{
		bigMessage(t, bad[0], 1, 300_000, ""),
		bigMessage(t, bad[1], 1, 1_000, "FF-\uffff"),
		bigMessage(t, bad[2], 1, 200_000, ""),
	} {
		insertWhole(t, db, m)
		insertWhole(t, db, testMessage(t, bad[i], 2))
	}
	for k, v := range insertRows(t, db, testEntities("H", 12), 10, 1) {
		want[k] = v
	}
	log, logs := testenv.Logger(zap.WarnLevel)
	r, err := NewRelay(RelayConfig{DB: db, SNS: pub, TopicARN: topic, Publishers: publishers, RoundMax: 40,
		Logger: log, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		all, _ := rowsLeft(t, db, 0, publishers)
		if all == 0 {
			break
		}
		if i == 30 {
			t.Fatalf("after 30 rounds %d rows neither published nor parked; the proxy refused %d batches as too long, %d messages",
				all, px.Refused("BatchRequestTooLong"), px.Refused("InvalidParameter"))
		}
		r.round(ctx)
	}
	var parked []struct {
		Entity       string
		Seq          int64
		ParkedReason string
	}
	if err := db.Raw(`SELECT entity, seq, parked_reason FROM outbox WHERE parked_at IS NOT NULL ORDER BY entity`).Scan(&parked).Error; err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(parked)
	if exp := fmt.Sprintf("[{%s 1 too_large} {%s 1 invalid_characters} {%s 1 refused}]", bad[0], bad[1], bad[2]); got != exp {
		t.Errorf("parked rows %s, want %s", got, exp)
	}
	for _, reason := range parkReasons {
		if n := metricValue(t, r.Metrics().Parked.WithLabelValues(reason)); n != 1 {
			t.Errorf("junban_outbox_parked_total{reason=%q} = %v, want 1", reason, n)
		}
	}
	if n := logs.FilterMessage("outbox row parked: SNS can never take it").Len(); n != 3 {
		t.Errorf("%d parked-row log lines, want 3", n)
	}
	if s, err := ReadStats(ctx, db); err != nil || s.Parked != 3 || s.Unpublished != 0 {
		t.Errorf("stats %+v (%v), want 3 parked and 0 unpublished", s, err)
	}
	// The first, of several rows, and then the halves holding the row, down to the row alone.
	if n := px.Refused("BatchRequestTooLong"); n < 2 {
		t.Errorf("the proxy refused %d batches as too long: the split was not exercised", n)
	}
	var bodies []string
	if err := db.Raw(`SELECT body::text FROM outbox WHERE seq = 2 AND entity LIKE 'BAD-%'`).Scan(&bodies).Error; err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		var m Message
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatal(err)
		}
		want[m.ID] = m
	}
	rcv := sub.receiveAll(t, want)
	rcv.checkOrder(t)
	if rcv.copies() != 0 {
		t.Errorf("%d copies on a FIFO topic", rcv.copies())
	}
}

// senderFaultSNS forwards PublishBatch to SNS but answers the entries whose message holds
// mark itself, every time, as AWS answers an entry it refuses for the sender's fault.
type senderFaultSNS struct {
	inner SNSPublisher
	mark  string
}

func (s *senderFaultSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	fwd := *in
	fwd.PublishBatchRequestEntries = nil
	var failed []snstypes.BatchResultErrorEntry
	for _, e := range in.PublishBatchRequestEntries {
		if strings.Contains(aws.ToString(e.Message), s.mark) {
			failed = append(failed, snstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameter"),
				Message: aws.String("Invalid parameter: Message"), SenderFault: true})
			continue
		}
		fwd.PublishBatchRequestEntries = append(fwd.PublishBatchRequestEntries, e)
	}
	out := &sns.PublishBatchOutput{}
	if len(fwd.PublishBatchRequestEntries) > 0 {
		var err error
		if out, err = s.inner.PublishBatch(ctx, &fwd, opts...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

// An entry SNS answers in Failed as the sender's fault is parked (refused) in the round it
// was refused, and its entity's next row published. (Fails with such an entry left to
// fail every round like any refused entry: its entity stops there.)
func TestRelayParksAnEntryRefusedAsTheSendersFault(t *testing.T) {
	db := testenv.Postgres(t)
	pub := testenv.SNS(t)
	topic := testenv.Topic(t, pub)
	insertWhole(t, db, bigMessage(t, "SF-LC-1", 1, 500, "refuse-me"))
	insertRows(t, db, []string{"SF-LC-1"}, 3, 2)
	insertRows(t, db, testEntities("SF", 8), 3, 1)
	r := newTestRelay(t, db, &senderFaultSNS{inner: pub, mark: "refuse-me"}, topic, 500)
	ctx := context.Background()
	for i := 0; ; i++ {
		if all, _ := rowsLeft(t, db, 0, 4); all == 0 {
			break
		}
		if i == 10 {
			all, _ := rowsLeft(t, db, 0, 4)
			t.Fatalf("after 10 rounds %d rows neither published nor parked", all)
		}
		r.round(ctx)
	}
	var reasons []string
	if err := db.Raw(`SELECT parked_reason FROM outbox WHERE parked_at IS NOT NULL`).Scan(&reasons).Error; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(reasons) != "[refused]" {
		t.Errorf("parked reasons %v, want [refused]", reasons)
	}
}

// A row's size counts its attributes as SNS does, and a row over the limit or holding a
// character SNS refuses is a fault; tab, newline, carriage return and characters beyond
// the BMP are not.
func TestRowFault(t *testing.T) {
	attrs := len("kind") + len("String") + len("order.refused") + len("entity") + len("String") + len("LC-1")
	at := row{Kind: "order.refused", Entity: "LC-1", Body: strings.Repeat("x", snsMaxBytes-attrs)}
	if at.size() != snsMaxBytes || at.fault() != "" {
		t.Errorf("a row at the limit: size %d, fault %q", at.size(), at.fault())
	}
	over := at
	over.Body += "x"
	if over.fault() != parkTooLarge {
		t.Errorf("a row a byte over: fault %q, want %s", over.fault(), parkTooLarge)
	}
	for body, want := range map[string]string{
		"a\tb\nc\rd \U0001D11E \uFFFD \uE000 \uD7FF": "",
		"FF-\uFFFF":    parkInvalidCharacters,
		"\uFFFE":       parkInvalidCharacters,
		"a\x01":        parkInvalidCharacters,
		"a\xffb":       parkInvalidCharacters,
		"\xed\xa0\x80": parkInvalidCharacters, // a surrogate, encoded
	} {
		if got := (&row{Kind: "order.refused", Entity: "LC-1", Body: body}).fault(); got != want {
			t.Errorf("%q: fault %q, want %q", body, got, want)
		}
	}
	if got := (&row{Kind: "order.refused", Entity: "FF-\uFFFF", Body: "{}"}).fault(); got != parkInvalidCharacters {
		t.Errorf("an entity holding U+FFFF: fault %q, want %s", got, parkInvalidCharacters)
	}
}

// snsChars agrees with the character set AWS documents, written out another way.
func FuzzSNSChars(f *testing.F) {
	for _, s := range []string{"", "a\tb", "FF-\uFFFF", "\xff", "\U0010FFFF", "\x1f", "\uE000\uFFFD"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
			return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || unicode.Is(unicode.Cs, r) || r == 0xFFFE || r == 0xFFFF
		})
		if got := snsChars(s); got != want {
			t.Fatalf("snsChars(%q) = %v, want %v", s, got, want)
		}
		rw := row{Kind: "stock.changed", Entity: "sku:X", Body: s}
		if rw.size() < len(s) {
			t.Fatalf("size %d below the body's %d", rw.size(), len(s))
		}
	})
}

// failingSNS fails every call holding an entry whose message has mark in it, as SNS does
// when it is in trouble (the call never reaches SNS); the others go through.
type failingSNS struct {
	inner SNSPublisher
	mark  string
}

func (f *failingSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, opts ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	for _, e := range in.PublishBatchRequestEntries {
		if strings.Contains(aws.ToString(e.Message), f.mark) {
			return nil, errors.New("failing: InternalError")
		}
	}
	return f.inner.PublishBatch(ctx, in, opts...)
}

// One entity whose every call fails (not the sender's fault: its rows are retried, never
// parked), with 80 rows, more than a round's window of 40, among healthy entities of every
// partition, its own too: every healthy row is published, and the stuck entity's rows
// wait, none lost. (Fails with the window read by id alone: the stuck entity's rows fill
// it and the healthy rows behind them are never read; and with the stuck entity's row in
// the batches before the others of its partition: they fail with it.)
func TestRelayStuckEntityStarvesNoOne(t *testing.T) {
	db := testenv.Postgres(t)
	pub := testenv.SNS(t)
	topic := testenv.Topic(t, pub)
	const publishers = 4
	stuck := ""
	for i := 0; stuck == ""; i++ {
		if e := fmt.Sprintf("STUCK-LC-%d", i); partitionOf(e, publishers) == 0 {
			stuck = e
		}
	}
	insertWhole(t, db, bigMessage(t, stuck, 1, 500, "fail-me"))
	insertRows(t, db, []string{stuck}, 79, 2)
	entities := testEntities("W", 16)
	insertRows(t, db, entities, 10, 1)
	r := newTestRelay(t, db, &failingSNS{inner: pub, mark: "fail-me"}, topic, 40)
	ctx := context.Background()
	for i := 0; ; i++ {
		all, _ := rowsLeft(t, db, 0, publishers)
		if all == 80 {
			break
		}
		if i == 40 {
			t.Fatalf("after 40 rounds %d healthy rows unpublished", all-80)
		}
		r.round(ctx)
	}
	inPart0 := 0
	for _, e := range entities {
		if partitionOf(e, publishers) == 0 {
			inPart0++
		}
	}
	if inPart0 == 0 {
		t.Fatal("no healthy entity shares the stuck entity's partition")
	}
	var n int64
	if err := db.Raw(`SELECT count(*) FROM outbox WHERE entity = ? AND published_at IS NULL AND parked_at IS NULL`, stuck).Scan(&n).Error; err != nil || n != 80 {
		t.Errorf("the stuck entity has %d rows waiting (%v), want all 80", n, err)
	}
}

// A whole call refused for a message's sake is split (and a row refused so alone parked);
// the same codes about the topic, and any other error, are not the message's fault.
func TestMessageFault(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&snstypes.BatchRequestTooLongException{Message: aws.String("The length of all the messages put together is more than the limit.")}, true},
		{fmt.Errorf("outbound: publish 1 messages: %w", &snstypes.InvalidParameterException{Message: aws.String("Invalid parameter: Message too long")}), true},
		{&smithy.GenericAPIError{Code: "ParameterValueInvalid", Message: "Message contains invalid characters"}, true},
		{&snstypes.InvalidParameterException{Message: aws.String("Invalid parameter: TopicArn")}, false},
		{&snstypes.NotFoundException{Message: aws.String("Topic does not exist")}, false},
		{&smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}, false},
		{errors.New("connection reset"), false},
	} {
		if got := messageFault(c.err); got != c.want {
			t.Errorf("messageFault(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
