package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSCeiling measures the raw message rate of an SQS endpoint on queueURL: workers
// each loop send-batch(10), receive(10), delete-batch for d. It returns messages per
// second that went the whole way (sent, received and deleted).
func SQSCeiling(ctx context.Context, c *sqs.Client, queueURL string, workers int, d time.Duration) (float64, error) {
	body := aws.String(`{"event_id":"ceiling","type":"payment.confirmed","lcid":"LC-ceiling","occurred_at":"2026-11-29T00:00:00Z"}`)
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entries := make([]types.SendMessageBatchRequestEntry, 10)
			for i := range entries {
				entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: body}
			}
			for ctx.Err() == nil {
				if _, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil || len(out.Messages) == 0 {
					continue
				}
				del := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
				for i, m := range out.Messages {
					del[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
				}
				if _, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: del}); err == nil {
					done.Add(int64(len(del)))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
