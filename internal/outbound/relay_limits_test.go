package outbound

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"
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
// Batches sized in bytes publish every row. (Fails with batches counted in entries: the
// big rows' partition never publishes again, and once its rows fill the 500-row window,
// neither do the others.)
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
	if n := publishedTotal(t, r.Metrics()); n != 3012 {
		t.Errorf("junban_outbox_published_total = %v, want 3012", n)
	}
}
