package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/ledger/stock"
	"github.com/junban/junban/internal/postgres/inventorydb"
	"github.com/junban/junban/internal/testenv"
)

// With no order-worker running nothing is persisted: loadgen must fail, with --json too,
// since scripts test its exit status. (Fails with the check after an early return for
// --json, as it was; tried.)
func TestLoadgenJSONFailsWhenResultsAreMissing(t *testing.T) {
	c := testenv.SQS(t)
	q := testenv.NewQueues(t, c, 5)
	t.Setenv("DATABASE_URL", testenv.PostgresURL(t))
	t.Setenv("AWS_ENDPOINT_URL_SQS", testenv.SQSConfig(t).Endpoint)
	t.Setenv("AWS_REGION", testenv.SQSConfig(t).Region)
	t.Setenv("JUNBAN_ORDERS_QUEUE", q.OrdersName)
	t.Setenv("JUNBAN_ORDERS_DLQ", q.OrdersDLQName)
	var out bytes.Buffer
	err := lab(context.Background(), &out, "loadgen", []string{"-run", testenv.ID(), "-orders", "2", "-skus", "2", "-wait", "1s", "-json"})
	if err == nil || !strings.Contains(err.Error(), "results missing") {
		t.Fatalf("loadgen --json with nothing persisted: %v, want the missing results", err)
	}
	var s struct {
		Missing int             `json:"missing"`
		InTurn  json.RawMessage `json:"latency_in_turn"`
	}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Missing == 0 || s.InTurn == nil {
		t.Fatalf("loadgen --json: %v\n%s", err, out.String())
	}
}

// loadgen --via-sns publishes its share of the events through the topic, subscribed to
// the orders queue without raw delivery: the queue holds SNS notifications beside raw
// events, every event once (no worker runs, so loadgen itself fails on the missing results).
func TestLoadgenViaSNSPublishesAShareThroughTheTopic(t *testing.T) {
	sn := testenv.SNS(t)
	q := labEnv(t)
	testenv.SetSNSenv(t)
	topic := testenv.Topic(t, sn)
	err := lab(context.Background(), nil, "loadgen", []string{"-run", testenv.ID(), "-orders", "30", "-skus", "2",
		"-duplicates", "0", "-warehouse", "0", "-wait", "1s", "-via-sns", "0.5", "-topic", topic})
	if err == nil || !strings.Contains(err.Error(), "results missing") {
		t.Fatalf("loadgen with no worker: %v, want the missing results", err)
	}
	c := testenv.SQS(t)
	seen := map[string]int{}
	wrapped := 0
	for {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.Orders.URL),
			MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			body := []byte(aws.ToString(m.Body))
			var n struct{ Type, Message, TopicArn string }
			if json.Unmarshal(body, &n) == nil && n.Type == "Notification" {
				if n.TopicArn != topic {
					t.Fatalf("a notification from %s", n.TopicArn)
				}
				wrapped++
				body = []byte(n.Message)
			}
			var ev struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(body, &ev); err != nil || ev.EventID == "" {
				t.Fatalf("not an event: %s", body)
			}
			seen[ev.EventID]++
		}
	}
	if len(seen) < 30 || wrapped == 0 || wrapped == len(seen) {
		t.Fatalf("%d events on the queue, %d of them through the topic: want both ways", len(seen), wrapped)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s on the queue %d times", id, n)
		}
	}
}

// -locations names registered locations (or all of them); a name the registry lacks is
// an error, not a location loadgen would make up.
func TestLoadgenLocationsAreTheRegisteredOnes(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	for _, l := range []stock.Location{
		{ID: "wh-a", Kind: stock.LocationWarehouse, Rank: 1, Ships: true, Enabled: true},
		{ID: "store-b", Kind: stock.LocationStore, Rank: 2, Pickup: true, Enabled: true},
	} {
		if err := inventorydb.PutLocation(ctx, db, l); err != nil {
			t.Fatal(err)
		}
	}
	got, err := registeredLocations(ctx, db, "store-b,wh-a")
	if err != nil || len(got) != 2 || got[0].ID != "store-b" || !got[0].Pickup || got[1].ID != "wh-a" {
		t.Fatalf("store-b,wh-a: %+v, %v", got, err)
	}
	if got, err := registeredLocations(ctx, db, "all"); err != nil || len(got) != 3 || got[0].ID != "default" { // the migration registers the default location
		t.Fatalf("all: %+v, %v", got, err)
	}
	if _, err := registeredLocations(ctx, db, "wh-a,nowhere"); err == nil || !strings.Contains(err.Error(), `"nowhere" is not a registered location`) {
		t.Fatalf("an unregistered location: %v", err)
	}
}
