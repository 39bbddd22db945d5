package queue_test

import (
	"context"
	"testing"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := queue.NewPublisher(queue.PublisherConfig{})
	testenv.ErrorNames(t, err, "Client", "QueueURL")
	_, err = queue.NewConsumer(queue.ConsumerConfig{})
	testenv.ErrorNames(t, err, "Handler", "Client", "QueueURL", "DLQURL")
	_, err = queue.NewBatchConsumer(queue.ConsumerConfig{Handler: func(context.Context, queue.Message) queue.Outcome { return queue.Outcome{} }})
	testenv.ErrorNames(t, err, "BatchHandler is required", "Handler is NewConsumer's", "Client")
}
