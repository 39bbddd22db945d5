package queue_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/junban/junban/internal/queue"
	"github.com/junban/junban/internal/testenv"
)

// BenchmarkSendMessageBatchCPU sends batches of ten 600-byte messages, one request at a
// time, through junban's SQS client (queue.NewClient, with its request counter), and
// reports this process's CPU per request beside the time: what one SQS request costs a
// worker whatever it carries, the SDK's middleware, signing, checksums and net/http
// included (docs/lab/benchmarks.md, "What one SQS request costs the client").
//
//	GOGC=400 go test -run '^$' -bench SendMessageBatchCPU -benchtime 5000x -count 3 ./internal/queue/
func BenchmarkSendMessageBatchCPU(b *testing.B) {
	c, err := queue.NewClient(context.Background(), testenv.SQSConfig(b), queue.CountRequests(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	q := testenv.NewQueues(b, c, 30)
	body := strings.Repeat("x", 600)
	entries := make([]types.SendMessageBatchRequestEntry, 10)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)}
	}
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.Results.URL), Entries: entries}
	ctx := context.Background()
	start := testenv.ProcessCPU(b)
	for b.Loop() {
		if _, err := c.SendMessageBatch(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((testenv.ProcessCPU(b)-start).Microseconds())/float64(b.N), "cpu-us/request")
}
