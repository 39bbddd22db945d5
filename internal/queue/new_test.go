package queue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/junban/junban/internal/queue"
)

// New refuses a Config that lacks a dependency, and names every one that is missing.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := queue.NewPublisher(queue.PublisherConfig{})
	mustName(t, err, "Client", "QueueURL")
	_, err = queue.NewConsumer(queue.ConsumerConfig{})
	mustName(t, err, "Handler", "Client", "QueueURL", "DLQURL")
	_, err = queue.NewBatchConsumer(queue.ConsumerConfig{Handler: func(context.Context, queue.Message) queue.Outcome { return queue.Outcome{} }})
	mustName(t, err, "BatchHandler is required", "Handler is NewConsumer's", "Client")
}

func mustName(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want an error naming %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}
