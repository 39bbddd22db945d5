package awslimits

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// backend stands for the emulator: it counts the requests that reach it and takes them.
type backend struct{ got atomic.Int64 }

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.got.Add(1)
	switch t := r.Header.Get("X-Amz-Target"); {
	case t == "AmazonSQS.SendMessage":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, `{"MessageId":"m-1"}`)
	case t != "":
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, `{"Successful":[],"Failed":[]}`)
	case strings.Contains(string(body), "Action=PublishBatch"):
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult>`+
			`<Successful/><Failed/></PublishBatchResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishBatchResponse>`)
	default:
		w.Header().Set("Content-Type", "text/xml")
		io.WriteString(w, `<PublishResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishResult><MessageId>m-1</MessageId>`+
			`</PublishResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PublishResponse>`)
	}
}

// clients are SNS and SQS clients whose requests go through a Proxy of l to a backend.
func clients(t *testing.T, l Limits) (*sns.Client, *sqs.Client, *backend, *Proxy) {
	t.Helper()
	b := &backend{}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	p, url := Start(t, srv.URL, l)
	cfg := aws.Config{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1}
	sn := sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(url) })
	sq := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(url)
		o.DisableMessageChecksumValidation = true
	})
	return sn, sq, b, p
}

// The attributes of the tests' messages: 4+6+5 + 6+6+4 + 3+6+2 = 42 bytes as AWS counts
// them (a binary value counts its bytes, not its base64).
const attrBytes = 42

func snsAttrs() map[string]snstypes.MessageAttributeValue {
	return map[string]snstypes.MessageAttributeValue{
		"kind":   {DataType: aws.String("String"), StringValue: aws.String("stock")},
		"entity": {DataType: aws.String("String"), StringValue: aws.String("LC-1")},
		"bin":    {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff}},
	}
}

func sqsAttrs() map[string]sqstypes.MessageAttributeValue {
	return map[string]sqstypes.MessageAttributeValue{
		"kind":   {DataType: aws.String("String"), StringValue: aws.String("stock")},
		"entity": {DataType: aws.String("String"), StringValue: aws.String("LC-1")},
		"bin":    {DataType: aws.String("Binary"), BinaryValue: []byte{0, 0xff}},
	}
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// An SNS message with its attributes at 262,144 bytes passes; a byte more is refused with
// InvalidParameter, the typed error the SDK gives, and never reaches the emulator.
func TestSNSMessageAtTheLimit(t *testing.T) {
	sn, _, b, p := clients(t, Limits{})
	ctx := context.Background()
	publish := func(n int) error {
		_, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String("arn:aws:sns:us-east-1:1:t"),
			Message: aws.String(strings.Repeat("é", n/2) + strings.Repeat("x", n%2)), MessageAttributes: snsAttrs()})
		return err
	}
	if err := publish(SNSMaxDefault - attrBytes); err != nil {
		t.Fatalf("a message at the limit: %v", err)
	}
	err := publish(SNSMaxDefault - attrBytes + 1)
	var ip *snstypes.InvalidParameterException
	if !errors.As(err, &ip) {
		t.Fatalf("a message a byte over the limit: %v, want InvalidParameter", err)
	}
	if b.got.Load() != 1 || p.Refused("InvalidParameter") != 1 {
		t.Errorf("backend got %d requests, proxy refused %d, want 1 and 1", b.got.Load(), p.Refused("InvalidParameter"))
	}
}

// A PublishBatch whose entries together are at the limit passes; a byte more is refused
// with BatchRequestTooLong though each entry alone is small.
func TestSNSBatchAtTheLimit(t *testing.T) {
	sn, _, b, _ := clients(t, Limits{SNSMax: 1000})
	ctx := context.Background()
	batch := func(last int) error {
		var es []snstypes.PublishBatchRequestEntry
		for i, n := range []int{300, 300, last} {
			es = append(es, snstypes.PublishBatchRequestEntry{Id: aws.String(string(rune('a' + i))),
				Message: aws.String(strings.Repeat("m", n-attrBytes)), MessageAttributes: snsAttrs()})
		}
		_, err := sn.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String("arn:aws:sns:us-east-1:1:t"), PublishBatchRequestEntries: es})
		return err
	}
	if err := batch(400); err != nil {
		t.Fatalf("a batch at the limit: %v", err)
	}
	err := batch(401)
	var tl *snstypes.BatchRequestTooLongException
	if !errors.As(err, &tl) {
		t.Fatalf("a batch a byte over the limit: %v, want BatchRequestTooLong", err)
	}
	if b.got.Load() != 1 {
		t.Errorf("backend got %d requests, want 1", b.got.Load())
	}
}

// Characters outside AWS's set, in the message or a string attribute, are refused with
// InvalidParameter; tab, newline, carriage return and characters beyond the BMP pass.
func TestSNSCharacters(t *testing.T) {
	sn, _, _, _ := clients(t, Limits{})
	ctx := context.Background()
	for _, c := range []struct {
		msg, attr string
		ok        bool
	}{
		{"a\tb\nc\rd \U0001D11E \uFFFD \uE000", "v", true},
		{"a\uFFFFb", "v", false},
		{"a\uFFFEb", "v", false},
		{"a\x01b", "v", false},
		{"ab", "LC-\uFFFF", false},
	} {
		attrs := snsAttrs()
		attrs["entity"] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(c.attr)}
		_, err := sn.Publish(ctx, &sns.PublishInput{TopicArn: aws.String("arn:aws:sns:us-east-1:1:t"), Message: aws.String(c.msg), MessageAttributes: attrs})
		switch {
		case c.ok && err != nil:
			t.Errorf("%q / %q: %v, want it taken", c.msg, c.attr, err)
		case !c.ok && apiCode(err) != "InvalidParameter":
			t.Errorf("%q / %q: %v, want InvalidParameter", c.msg, c.attr, err)
		}
	}
}

// SQS: a message at the queue's MaximumMessageSize passes, a byte more is refused with
// InvalidParameterValue; a batch over it with BatchRequestTooLong; a character outside
// AWS's set with InvalidMessageContents, each as the SDK's typed error or code.
func TestSQSLimits(t *testing.T) {
	for _, max := range []int{0, 262_144} {
		_, sq, b, _ := clients(t, Limits{SQSMax: max})
		if max == 0 {
			max = SQSMaxDefault
		}
		ctx := context.Background()
		q := aws.String("http://127.0.0.1/000000000000/q")
		send := func(body string) error {
			_, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(body), MessageAttributes: sqsAttrs()})
			return err
		}
		if err := send(strings.Repeat("x", max-attrBytes)); err != nil {
			t.Fatalf("max %d: a message at the limit: %v", max, err)
		}
		if err := send(strings.Repeat("x", max-attrBytes+1)); apiCode(err) != "InvalidParameterValue" {
			t.Errorf("max %d: a message a byte over: %v, want InvalidParameterValue", max, err)
		}
		var bad *sqstypes.InvalidMessageContents
		if err := send("FF-\uffff"); !errors.As(err, &bad) {
			t.Errorf("max %d: U+FFFF: %v, want InvalidMessageContents", max, err)
		}
		batch := func(last int) error {
			es := []sqstypes.SendMessageBatchRequestEntry{
				{Id: aws.String("a"), MessageBody: aws.String(strings.Repeat("x", max/2-attrBytes)), MessageAttributes: sqsAttrs()},
				{Id: aws.String("b"), MessageBody: aws.String(strings.Repeat("x", last-attrBytes)), MessageAttributes: sqsAttrs()},
			}
			_, err := sq.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q, Entries: es})
			return err
		}
		if err := batch(max - max/2); err != nil {
			t.Fatalf("max %d: a batch at the limit: %v", max, err)
		}
		var tl *sqstypes.BatchRequestTooLong
		if err := batch(max - max/2 + 1); !errors.As(err, &tl) {
			t.Errorf("max %d: a batch a byte over: %v, want BatchRequestTooLong", max, err)
		}
		if b.got.Load() != 2 {
			t.Errorf("max %d: backend got %d requests, want the 2 within the limits", max, b.got.Load())
		}
	}
}

// A message at a lowered limit passes, and requests the proxy does not check (other
// actions) pass through.
func TestOtherRequestsPass(t *testing.T) {
	sn, _, b, _ := clients(t, Limits{SNSMax: 10})
	_, err := sn.Publish(context.Background(), &sns.PublishInput{TopicArn: aws.String("arn:aws:sns:us-east-1:1:t"), Message: aws.String("0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	// The backend answers ListTopics with a Publish response, which the SDK may or may not
	// take: what matters is that the request reached it.
	sn.ListTopics(context.Background(), &sns.ListTopicsInput{})
	if b.got.Load() != 2 {
		t.Errorf("backend got %d requests, want 2", b.got.Load())
	}
}

// The parsers take any body without panicking, and a message's size never goes below its body's.
func FuzzParse(f *testing.F) {
	f.Add([]byte("Action=PublishBatch&PublishBatchRequestEntries.member.1.Message=m0&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=b&PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.BinaryValue=eHk%3D"))
	f.Add([]byte("Action=Publish&Message=%EF%BF%BF&MessageAttributes.entry.2.Value.StringValue=k"))
	f.Add([]byte(`{"Entries":[{"Id":"0","MessageAttributes":{"b":{"BinaryValue":"eHk=","DataType":"Binary"}},"MessageBody":"hi"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, set := range [][]message{snsMsgs(body), sqsMsgs("AmazonSQS.SendMessage", body), sqsMsgs("AmazonSQS.SendMessageBatch", body)} {
			for _, m := range set {
				if m.size() < len(m.body) {
					t.Fatalf("size %d below the body's %d", m.size(), len(m.body))
				}
				checkSNS([]message{m}, false, 100)
				checkSQS([]message{m}, true, 100)
			}
		}
	})
}

func snsMsgs(body []byte) []message {
	m, _, _ := parseSNS(body)
	return m
}

func sqsMsgs(target string, body []byte) []message {
	m, _, _ := parseSQS(target, body)
	return m
}
