package testenv

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// SNSEndpoint returns the SNS endpoint of the test stack. fauxqs serves SNS beside SQS (the
// stack file's AWS_ENDPOINT_URL_SNS); local-aws-sqs serves none, so a test that needs SNS
// is skipped when that is the SQS in use, and fails when the SNS endpoint is missing
// anywhere else.
func SNSEndpoint(t testing.TB) string {
	t.Helper()
	cfg := SQSConfig(t)
	if onLocalAWSSQS(cfg.Endpoint) {
		t.Skip("needs SNS, and the SQS in use is local-aws-sqs, which serves none (fauxqs does)")
	}
	ep := os.Getenv("AWS_ENDPOINT_URL_SNS")
	if ep == "" {
		t.Fatalf("testenv: AWS_ENDPOINT_URL_SNS is not set; run `make stack` again (with fauxqs it names fauxqs) "+
			"or set it to the SNS beside %s", cfg.Endpoint)
	}
	return ep
}

// onLocalAWSSQS reports whether the SQS endpoint in use is the stack's local-aws-sqs.
func onLocalAWSSQS(endpoint string) bool {
	other := os.Getenv("JUNBAN_SQS_ENDPOINT_LOCAL_AWS_SQS")
	return other != "" && endpoint == other
}

// HasSNS reports whether the test stack has an SNS beside the SQS in use (fauxqs), for a
// test that sends part of its load through a topic when it can.
func HasSNS(t testing.TB) bool {
	t.Helper()
	cfg := SQSConfig(t)
	return !onLocalAWSSQS(cfg.Endpoint) && os.Getenv("AWS_ENDPOINT_URL_SNS") != ""
}

// SNS returns a client for the test stack's SNS.
func SNS(t testing.TB) *sns.Client {
	t.Helper()
	ep := SNSEndpoint(t)
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(SQSConfig(t).Region))
	if err != nil {
		t.Fatal(err)
	}
	return sns.NewFromConfig(awsCfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(ep) })
}

// Topic creates an SNS topic unique to the test and returns its ARN; it is deleted when
// the test ends.
func Topic(t testing.TB, c *sns.Client) string {
	t.Helper()
	out, err := c.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: aws.String(Name(t))})
	if err != nil {
		t.Fatalf("testenv: create topic: %v", err)
	}
	arn := aws.ToString(out.TopicArn)
	t.Cleanup(func() { c.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(arn)}) })
	return arn
}

// SetSNSenv points the settings of a command run in the test's process at the test SNS
// endpoint, until the test ends.
func SetSNSenv(t testing.TB) {
	t.Helper()
	t.Setenv("AWS_ENDPOINT_URL_SNS", SNSEndpoint(t))
}

// OnFauxqs reports whether the SQS in use is the stack's fauxqs, for a test of a feature
// fauxqs lacks (it keeps no AWSTraceHeader system attribute, say): such a test skips there,
// saying so, and runs on local-aws-sqs (make test-other-sqs) and AWS.
func OnFauxqs(t testing.TB) bool {
	t.Helper()
	ep := os.Getenv("JUNBAN_SQS_ENDPOINT_FAUXQS")
	return ep != "" && SQSConfig(t).Endpoint == ep
}
