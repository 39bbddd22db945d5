// Package queue consumes and publishes junban's SQS messages with aws-sdk-go-v2.
package queue

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/config"
)

// NewClient builds an SQS client from the standard AWS configuration chain, pointed at
// cfg.Endpoint when one is set (LocalStack or the local emulator).
func NewClient(ctx context.Context, cfg config.SQS) (*sqs.Client, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region))
	if err != nil {
		return nil, fmt.Errorf("queue: aws config: %w", err)
	}
	return sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	}), nil
}

// ResolveURL turns a queue name into its URL; a URL is returned as it is.
func ResolveURL(ctx context.Context, c *sqs.Client, nameOrURL string) (string, error) {
	if strings.HasPrefix(nameOrURL, "http://") || strings.HasPrefix(nameOrURL, "https://") {
		return nameOrURL, nil
	}
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(nameOrURL)})
	if err != nil {
		return "", fmt.Errorf("queue: resolve %q: %w", nameOrURL, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Pair is a queue and its dead-letter queue.
type Pair struct {
	URL    string
	DLQURL string
}

// EnsurePair creates name and name's dead-letter queue (if absent) with a redrive
// policy of maxReceiveCount receives, and returns their URLs.
func EnsurePair(ctx context.Context, c *sqs.Client, name, dlqName string, maxReceiveCount int, visibility int) (Pair, error) {
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(dlqName),
		Attributes: map[string]string{"MessageRetentionPeriod": "1209600"},
	})
	if err != nil {
		return Pair{}, fmt.Errorf("queue: create %s: %w", dlqName, err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dlq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Pair{}, fmt.Errorf("queue: arn of %s: %w", dlqName, err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes["QueueArn"], maxReceiveCount)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			"RedrivePolicy":     redrive,
			"VisibilityTimeout": fmt.Sprint(visibility),
		},
	})
	if err != nil {
		return Pair{}, fmt.Errorf("queue: create %s: %w", name, err)
	}
	return Pair{URL: aws.ToString(q.QueueUrl), DLQURL: aws.ToString(dlq.QueueUrl)}, nil
}
