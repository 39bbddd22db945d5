// Package queue consumes and publishes junban's SQS messages with aws-sdk-go-v2.
package queue

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/junban/junban/internal/platform/config"
)

// IdleConns is how many idle connections an SQS client keeps to its endpoint.
//
// The SDK's transport keeps 10 per host. A consumer has more calls than that in flight at
// once (its long polls, its delete batches and its sends), so each busy moment ended by
// closing the connections over 10, and the next one dialled them again: a TCP (and, on
// real SQS, a TLS) handshake per call. docs/queue.md has the figures. An SQS client
// talks to one host, so it may keep as many as the transport keeps in all (100).
const IdleConns = 100

// NewClient builds an SQS client from the standard AWS configuration chain, pointed at
// cfg.Endpoint when one is set (LocalStack or the local emulator), that keeps IdleConns
// idle connections. With CountRequests it counts its requests (see there).
func NewClient(ctx context.Context, cfg config.SQS, opts ...ClientOption) (*sqs.Client, error) {
	var co clientOptions
	for _, o := range opts {
		o(&co)
	}
	var counter *requestCounter
	if co.reg != nil {
		var err error
		if counter, err = newRequestCounter(co.reg); err != nil {
			return nil, fmt.Errorf("queue: request metrics: %w", err)
		}
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConnsPerHost = IdleConns
	})
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(cfg.Region), awsconfig.WithHTTPClient(httpClient))
	if err != nil {
		return nil, fmt.Errorf("queue: aws config: %w", err)
	}
	return sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		o.HTTPClient = GuardBodies(o.HTTPClient)
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if counter != nil {
			o.APIOptions = append(o.APIOptions, counter.addTo)
		}
	}), nil
}

// GuardBodies returns c with each request's body handed to net/http without the WriteTo
// method of the SDK's body type.
//
// The SDK closes a request's body as soon as the answer's headers are in, and net/http
// may not be done with it then: once it has written the body, it copies whatever is left
// of it (nothing) before it reports the write done. Through the WriteTo of the SDK's body
// that copy, after the close, returns io.EOF as an error; net/http takes it for a failed
// write and closes the connection under the answer being read. The SDK retries, but the
// answer is lost: for a receive, its messages stay invisible for the visibility timeout.
// On loopback the answer often beats the transport's goroutine (a loaded machine, an
// emulator that answers at once); seen in benchmarks and in the DLQ redrive's test.
// Read, after the close, reports a clean end instead. Every AWS client of junban's wraps
// its HTTP client so (SQS here, SNS in internal/aws/topics), after the configuration is
// loaded: its custom CA bundle (AWS_CA_BUNDLE) needs the SDK's own client type.
func GuardBodies(c aws.HTTPClient) aws.HTTPClient { return guarded{c} }

type guarded struct{ next aws.HTTPClient }

func (g guarded) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = readCloser{req.Body}
	}
	return g.next.Do(req)
}

// readCloser is a body with only Read and Close: io.Copy then reads it to its end.
type readCloser struct{ io.ReadCloser }

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
// policy of maxReceiveCount receives, and returns their URLs. Names that end in ".fifo"
// make FIFO queues (both or neither, see CheckPair).
func EnsurePair(ctx context.Context, c *sqs.Client, name, dlqName string, maxReceiveCount int, visibility int) (Pair, error) {
	if err := CheckPair(name, dlqName); err != nil {
		return Pair{}, err
	}
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(dlqName),
		Attributes: withKind(dlqName, map[string]string{"MessageRetentionPeriod": "1209600"}),
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
		Attributes: withKind(name, map[string]string{
			"RedrivePolicy":     redrive,
			"VisibilityTimeout": fmt.Sprint(visibility),
		}),
	})
	if err != nil {
		return Pair{}, fmt.Errorf("queue: create %s: %w", name, err)
	}
	return Pair{URL: aws.ToString(q.QueueUrl), DLQURL: aws.ToString(dlq.QueueUrl)}, nil
}

// MaxMessageSize reads the queue's MaximumMessageSize attribute (body plus attributes, in
// bytes). A server that does not report it (some emulators) gets MaxMessageSizeDefault,
// SQS's classic 256 KiB, with reported false; a value outside SQS's 1024..1048576 is an error.
func MaxMessageSize(ctx context.Context, c *sqs.Client, queueURL string) (size int, reported bool, err error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize},
	})
	if err != nil {
		return 0, false, fmt.Errorf("queue: attributes of %s: %w", queueURL, err)
	}
	v, ok := out.Attributes[string(types.QueueAttributeNameMaximumMessageSize)]
	if !ok || v == "" {
		return MaxMessageSizeDefault, false, nil
	}
	size, err = strconv.Atoi(v)
	if err != nil || size < 1024 || size > 1024*1024 {
		return 0, false, fmt.Errorf("queue: %s reports MaximumMessageSize %q, not a size in 1024..1048576", queueURL, v)
	}
	return size, true, nil
}
