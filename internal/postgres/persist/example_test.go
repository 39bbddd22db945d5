package persist_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"gorm.io/gorm"

	"github.com/junban/junban/internal/event"
	"github.com/junban/junban/internal/postgres/persist"
	"github.com/junban/junban/internal/queue"
)

// Apply writes a batch of results in one transaction and says what it did with each.
func ExampleApply() {
	var db *gorm.DB // config.Postgres{URL: ...}.Open()
	results := []event.Result{ /* decoded from the results queue */ }

	rep, err := persist.Apply(context.Background(), db, results)
	if err != nil {
		// Nothing committed (PostgreSQL away, a deadlock): retry the whole batch later.
		return
	}
	for i, r := range rep.Results {
		switch r.Status {
		case persist.Applied, persist.Duplicate:
			// Committed, or committed before: the message can be deleted.
		case persist.Poison:
			fmt.Println("dead-letter", results[i].EventID, "because", r.Err)
		}
	}
	fmt.Println("skipped as older or seen:", rep.Skips)
}

// A Handler is the persist-worker's batch handler: it decodes, applies, holds a batch
// while PostgreSQL is away and maps each message to Done, Retry or Poison.
func ExampleHandler() {
	var db *gorm.DB
	var c *sqs.Client
	quit := make(chan struct{}) // close it when shutdown starts

	h, err := persist.NewHandler(persist.HandlerConfig{DB: db, RetryMax: 15 * time.Second, Quit: quit})
	if err != nil {
		return
	}
	consumer, err := queue.NewBatchConsumer(queue.ConsumerConfig{
		Client:   c,
		QueueURL: "https://sqs.../results", DLQURL: "https://sqs.../results-dlq", BatchMax: 100,
		BatchHandler: h.HandleBatch,
	})
	if err != nil {
		return
	}
	consumer.Run(context.Background())
}
