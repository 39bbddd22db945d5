package queue

import (
	"context"
	"errors"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// ClientOption changes what NewClient builds.
type ClientOption func(*clientOptions)

type clientOptions struct {
	reg prometheus.Registerer
}

// CountRequests makes NewClient's client count every request it sends to SQS on reg, at
// the wire: each attempt of a retried call is a request (SQS bills each one, an empty
// receive included). The series are
//
//	junban_sqs_requests_total{queue,action,error}  requests; error is "" when SQS answered
//	                                                with success, else the error code SQS
//	                                                returned, "canceled", or "transport"
//	junban_sqs_messages_total{queue,action}        messages the requests carried: the
//	                                                entries of SendMessage(Batch) and
//	                                                DeleteMessage(Batch) requests, the
//	                                                messages ReceiveMessage answers returned
//
// queue is the queue's name (the last segment of the input's QueueUrl, or its QueueName),
// "" for calls about no queue (ListQueues); action is the API operation. A nil reg counts
// nothing.
func CountRequests(reg prometheus.Registerer) ClientOption {
	return func(o *clientOptions) { o.reg = reg }
}

// requestCounter is the pair of vectors one registry holds.
type requestCounter struct {
	requests *prometheus.CounterVec
	messages *prometheus.CounterVec
}

func newRequestCounter(reg prometheus.Registerer) (*requestCounter, error) {
	req, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: "sqs", Name: "requests_total",
		Help: "SQS requests sent, each attempt of a retried call counted (what SQS bills), by queue, action and error (\"\" for success).",
	}, []string{"queue", "action", "error"}))
	if err != nil {
		return nil, err
	}
	msg, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: "sqs", Name: "messages_total",
		Help: "Messages carried by SQS requests: entries sent and deleted, messages received; by queue and action.",
	}, []string{"queue", "action"}))
	if err != nil {
		return nil, err
	}
	return &requestCounter{requests: req, messages: msg}, nil
}

// callKey carries the queue name and the entries of one call from the Initialize step
// (which sees the input) to the Finalize step (which sees each attempt).
type callKey struct{}

type callInfo struct {
	queue   string
	entries int // entries the request carries (send and delete), 0 otherwise
}

// addTo adds the counting middleware to a client's stack: one in Initialize that reads
// the input, one at the end of Finalize, after the SDK's Retry middleware, so that it runs
// once per attempt.
func (c *requestCounter) addTo(st *middleware.Stack) error {
	if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("junban-sqs-call", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		ctx = middleware.WithStackValue(ctx, callKey{}, describeCall(in.Parameters))
		return next.HandleInitialize(ctx, in)
	}), middleware.After); err != nil {
		return err
	}
	return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("junban-sqs-request", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleFinalize(ctx, in)
		info, _ := middleware.GetStackValue(ctx, callKey{}).(callInfo)
		action := awsmiddleware.GetOperationName(ctx)
		c.requests.WithLabelValues(info.queue, action, errorLabel(err)).Inc()
		n := info.entries
		if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil && r != nil {
			n = len(r.Messages)
		}
		if n > 0 {
			c.messages.WithLabelValues(info.queue, action).Add(float64(n))
		}
		return out, md, err
	}), middleware.After)
}

// describeCall reads an SQS input's queue and the entries it carries.
func describeCall(params any) callInfo {
	switch in := params.(type) {
	case *sqs.SendMessageInput:
		return callInfo{queue: urlName(in.QueueUrl), entries: 1}
	case *sqs.SendMessageBatchInput:
		return callInfo{queue: urlName(in.QueueUrl), entries: len(in.Entries)}
	case *sqs.DeleteMessageInput:
		return callInfo{queue: urlName(in.QueueUrl), entries: 1}
	case *sqs.DeleteMessageBatchInput:
		return callInfo{queue: urlName(in.QueueUrl), entries: len(in.Entries)}
	case *sqs.ReceiveMessageInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	case *sqs.ChangeMessageVisibilityInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	case *sqs.ChangeMessageVisibilityBatchInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	case *sqs.GetQueueAttributesInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	case *sqs.GetQueueUrlInput:
		return callInfo{queue: deref(in.QueueName)}
	case *sqs.CreateQueueInput:
		return callInfo{queue: deref(in.QueueName)}
	case *sqs.PurgeQueueInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	case *sqs.DeleteQueueInput:
		return callInfo{queue: urlName(in.QueueUrl)}
	}
	return callInfo{}
}

func urlName(u *string) string { return queueName(deref(u)) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errorLabel is "" for success, the error code for an error SQS returned, "canceled" for
// a call its context ended, and "transport" for anything else (no answer).
func errorLabel(err error) string {
	if err == nil {
		return ""
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	return "transport"
}
