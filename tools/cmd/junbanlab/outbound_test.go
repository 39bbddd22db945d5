package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/postgres/outbound"
	"github.com/junban/junban/internal/testenv"
	"github.com/junban/junban/internal/testenv/outboundcheck"
)

// outbound check drains the subscriber queue and passes (exit 0, the JSON report) when it
// got every outbox row, a copy included; run again after a row no one sent was committed,
// it fails and names it missing.
func TestOutboundCheck(t *testing.T) {
	labEnv(t)
	ctx := context.Background()
	db, err := config.Postgres{URL: os.Getenv("DATABASE_URL")}.Open()
	if err != nil {
		t.Fatal(err)
	}
	sq := testenv.SQS(t)
	name := testenv.Name(t)
	qu, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: qu.QueueUrl}) })
	row := func(n int, send int) {
		t.Helper()
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		data, _ := json.Marshal(outbound.StockLevelData{AvailableToShip: 0, Threshold: 10, Level: outbound.LevelOut, Previous: outbound.LevelOK, AsOf: "2026-12-02"})
		body, _ := json.Marshal(outbound.Message{ID: id, Kind: outbound.StockOut, Entity: "sku:TEA-1", SKU: "TEA-1", Seq: int64(n),
			OccurredAt: time.Now().UTC(), CausedBy: outbound.Cause{EventID: "evt-1", Type: event.OrderPlaced}, Data: data})
		if err := db.Exec(`INSERT INTO outbox (message_id, kind, entity, seq, body, published_at) VALUES (?, ?, 'sku:TEA-1', ?, ?, now())`,
			id, outbound.StockOut, n, string(body)).Error; err != nil {
			t.Fatal(err)
		}
		for range send {
			if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: qu.QueueUrl, MessageBody: aws.String(string(body))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	row(1, 1)
	row(2, 2)
	var rep outboundcheck.Report
	if err := decode(t, &rep, "outbound check", "--queue", name, "--quiet", "1s"); err != nil || !rep.OK() ||
		rep.Distinct != 2 || rep.Duplicates.Count != 1 || rep.Kinds[outbound.StockOut] != 2 {
		t.Fatalf("outbound check: %+v, %v", rep, err)
	}
	row(3, 0)
	rep = outboundcheck.Report{}
	if err := decode(t, &rep, "outbound check", "--queue", name, "--quiet", "1s", "--wait", "0"); err == nil || rep.Missing.Count != 3 {
		t.Fatalf("outbound check after a row never sent: %+v, %v; want a failure, every row missing (the queue was drained)", rep, err)
	}
}
