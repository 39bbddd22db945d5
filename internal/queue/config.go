package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/junban/junban/internal/platform/config"
)

// Consumer defaults.
const (
	// ConcurrencyDefault is the number of handlers a Consumer runs at once.
	ConcurrencyDefault = 10
	// BatchConcurrencyDefault is the number of BatchHandler calls a batch consumer runs at once.
	BatchConcurrencyDefault = 2
	// MaxMessagesDefault is the most messages one ReceiveMessage asks for (SQS allows 10).
	MaxMessagesDefault = 10
	// WaitTimeSecondsDefault is the long poll of one ReceiveMessage (SQS allows 20 at most).
	WaitTimeSecondsDefault = 20
	// ShutdownBudgetDefault is the time in-flight handlers get after Run's context ends:
	// the binaries' JUNBAN_SHUTDOWN_BUDGET default.
	ShutdownBudgetDefault = config.ShutdownBudgetDefault
	// RetryBaseDefault is the first Retry's backoff (before jitter).
	RetryBaseDefault = 2 * time.Second
	// RetryMaxDefault caps the Retry backoff: SQS's maximum visibility timeout, 12 h.
	RetryMaxDefault = 12 * time.Hour
	// DeleteLingerDefault is how long a delete waits for others to share its
	// DeleteMessageBatch (JUNBAN_SQS_DELETE_LINGER's default): a delete holds up nothing
	// but the message's own retirement, so a linger that fills the batches costs no latency
	// (docs/performance.md, "Decisions kept").
	DeleteLingerDefault = 25 * time.Millisecond
	// BatchMaxDefault is the most messages a batch consumer hands to one BatchHandler call.
	BatchMaxDefault = 50
	// BatchWindowDefault is the longest a batch consumer keeps collecting after a batch's first message.
	BatchWindowDefault = 500 * time.Millisecond
	// CallTimeoutDefault bounds one SQS call other than the long poll.
	CallTimeoutDefault = 10 * time.Second
	// ReceiveLingerDefault is the order-worker's JUNBAN_SQS_RECEIVE_LINGER default (see
	// ConsumerConfig.ReceiveLinger, whose zero turns it off; docs/performance.md,
	// "Decisions kept").
	ReceiveLingerDefault = 20 * time.Millisecond
	// ReceiveLingerMax bounds ReceiveLinger: a linger is a few tens of milliseconds that
	// a message may wait more; a second would be a latency, not a fill.
	ReceiveLingerMax = time.Second

	// maxVisibility is SQS's maximum visibility timeout.
	maxVisibility      = 12 * time.Hour
	maxWaitTimeSeconds = 20
)

// ConsumerConfig configures a Consumer. Zero values stand for the defaults.
type ConsumerConfig struct {
	// Client reaches SQS (required).
	Client *sqs.Client
	// Handler settles each message (NewConsumer's; required there).
	Handler Handler
	// BatchHandler settles a batch of messages (NewBatchConsumer's; required there).
	BatchHandler BatchHandler
	// QueueURL is the queue to consume (required).
	QueueURL string
	// DLQURL is the dead-letter queue that Poison messages are sent to (required).
	DLQURL string
	// Name labels metrics and logs; default: the last path segment of QueueURL.
	Name string
	// Concurrency is how many handlers run at once (for a batch consumer: how many
	// BatchHandler calls). No message is received while all of them are busy.
	// Default ConcurrencyDefault (BatchConcurrencyDefault for a batch consumer).
	Concurrency int
	// MaxMessages is the most messages one ReceiveMessage asks for, 1..10. Default MaxMessagesDefault.
	MaxMessages int
	// Receivers is how many ReceiveMessage calls a consumer keeps in flight at once, each
	// for at most MaxMessages of the free handlers. One receive at a time caps a consumer at
	// MaxMessages per round trip, whatever its Concurrency. A batch consumer's receivers fill
	// one batch at a time between them (see NewBatchConsumer). Default 1.
	Receivers int
	// ReceiveFill is how long a (non-batch) consumer whose handlers are all but a few busy
	// waits for more of them to free up before it receives, so that a receive asks for
	// MaxMessages rather than for the one or two handlers free at the moment. While
	// handlers are free it receives at once. 0 (the default) never waits.
	ReceiveFill time.Duration
	// ReceiveLinger makes the receives in flight follow how full they come back (see
	// pacer): a receive that came back part-full lowers the receives allowed in flight
	// (at least one) and its receiver waits this long before its next receive; full ones
	// in a row raise them (up to Receivers). A message may wait this much longer to be received.
	// 0 (the default) keeps Receivers receives in flight, none waiting.
	ReceiveLinger time.Duration
	// WaitTimeSeconds is the long poll of one ReceiveMessage, 1..20. Default WaitTimeSecondsDefault.
	WaitTimeSeconds int
	// VisibilityTimeout is asked for on every receive and is what every heartbeat extends
	// a message by; whole seconds. Default: the queue's own VisibilityTimeout attribute.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is how often the visibility of messages still being handled is
	// extended. Default: a third of the visibility timeout.
	HeartbeatInterval time.Duration
	// RetryBase is the backoff of a message's first Retry; it doubles with every
	// receive (ApproximateReceiveCount) and gets jitter. Default RetryBaseDefault.
	RetryBase time.Duration
	// RetryMax caps the Retry backoff; at most 12 h. Default RetryMaxDefault.
	RetryMax time.Duration
	// RetryDelay, when set, replaces the backoff formula (RetryBase, RetryMax):
	// it gets the message's receive count and returns the delay before redelivery.
	RetryDelay func(receiveCount int) time.Duration
	// DeleteLinger is how long a delete waits for others to share a DeleteMessageBatch.
	// Default DeleteLingerDefault.
	DeleteLinger time.Duration
	// BatchMax is the most messages a batch consumer hands to one BatchHandler call.
	// Default BatchMaxDefault.
	BatchMax int
	// BatchWindow is the longest a batch consumer keeps collecting messages after the
	// first one of a batch; a part-full receive with no BatchHandler call in flight goes
	// at once, and a batch collecting goes when the calls in flight returned (see
	// NewBatchConsumer). Default BatchWindowDefault.
	BatchWindow time.Duration
	// ShutdownBudget is how long Run waits for in-flight handlers once its context
	// ended; then their contexts are cancelled and their messages handed back to SQS.
	// Default ShutdownBudgetDefault.
	ShutdownBudget time.Duration
	// CallTimeout bounds one SQS call other than the long poll. Default CallTimeoutDefault.
	CallTimeout time.Duration
	// Registerer receives the consumer's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger logs the consumer's decisions; nil logs nothing.
	Logger *zap.Logger
	// SpanInHandler leaves the process span of each message to the Handler, which starts
	// it with StartProcess once it has read the trace context the message's body carries
	// (an SNS notification's MessageAttributes, say), and ends it with EndProcess. Off, the
	// consumer starts it from the message's attributes. Not for a BatchHandler.
	SpanInHandler bool
}

func (cfg *ConsumerConfig) setDefaults(batch bool) {
	if cfg.Name == "" {
		cfg.Name = queueName(cfg.QueueURL)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = ConcurrencyDefault
		if batch {
			cfg.Concurrency = BatchConcurrencyDefault
		}
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = MaxMessagesDefault
	}
	if cfg.WaitTimeSeconds == 0 {
		cfg.WaitTimeSeconds = WaitTimeSecondsDefault
	}
	if cfg.Receivers == 0 {
		cfg.Receivers = 1
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = RetryBaseDefault
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = RetryMaxDefault
	}
	if cfg.DeleteLinger == 0 {
		cfg.DeleteLinger = DeleteLingerDefault
	}
	if cfg.BatchMax == 0 {
		cfg.BatchMax = BatchMaxDefault
	}
	if cfg.BatchWindow == 0 {
		cfg.BatchWindow = BatchWindowDefault
	}
	if cfg.ShutdownBudget == 0 {
		cfg.ShutdownBudget = ShutdownBudgetDefault
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = CallTimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
}

// Validate reports every invalid setting at once.
func (cfg ConsumerConfig) Validate() error {
	cfg.setDefaults(false)
	var errs []error
	if cfg.QueueURL == "" {
		errs = append(errs, errors.New("QueueURL is required"))
	}
	if cfg.DLQURL == "" {
		errs = append(errs, errors.New("DLQURL is required (Poison messages go there)"))
	}
	if cfg.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("Concurrency %d must be positive", cfg.Concurrency))
	}
	if cfg.MaxMessages < 1 || cfg.MaxMessages > 10 {
		errs = append(errs, fmt.Errorf("MaxMessages %d outside 1..10", cfg.MaxMessages))
	}
	if cfg.Receivers < 1 {
		errs = append(errs, fmt.Errorf("Receivers %d must be positive", cfg.Receivers))
	}
	if cfg.WaitTimeSeconds < 1 || cfg.WaitTimeSeconds > maxWaitTimeSeconds {
		errs = append(errs, fmt.Errorf("WaitTimeSeconds %d outside 1..20", cfg.WaitTimeSeconds))
	}
	if cfg.VisibilityTimeout < 0 || cfg.VisibilityTimeout > maxVisibility || cfg.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("VisibilityTimeout %v must be whole seconds within 0..12h", cfg.VisibilityTimeout))
	}
	if cfg.HeartbeatInterval < 0 {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %v is negative", cfg.HeartbeatInterval))
	}
	if cfg.ReceiveFill < 0 {
		errs = append(errs, fmt.Errorf("ReceiveFill %v is negative", cfg.ReceiveFill))
	}
	if cfg.ReceiveLinger < 0 || cfg.ReceiveLinger > ReceiveLingerMax {
		errs = append(errs, fmt.Errorf("ReceiveLinger %v outside 0..%v", cfg.ReceiveLinger, ReceiveLingerMax))
	}
	if cfg.VisibilityTimeout > 0 && cfg.HeartbeatInterval >= cfg.VisibilityTimeout {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %v must be shorter than VisibilityTimeout %v", cfg.HeartbeatInterval, cfg.VisibilityTimeout))
	}
	if cfg.RetryBase < 0 {
		errs = append(errs, fmt.Errorf("RetryBase %v is negative", cfg.RetryBase))
	}
	if cfg.RetryMax < 0 || cfg.RetryMax > maxVisibility {
		errs = append(errs, fmt.Errorf("RetryMax %v outside 0..12h", cfg.RetryMax))
	}
	if cfg.DeleteLinger < 0 {
		errs = append(errs, fmt.Errorf("DeleteLinger %v is negative", cfg.DeleteLinger))
	}
	if cfg.BatchMax < 1 {
		errs = append(errs, fmt.Errorf("BatchMax %d must be positive", cfg.BatchMax))
	}
	if cfg.BatchWindow < 0 {
		errs = append(errs, fmt.Errorf("BatchWindow %v is negative", cfg.BatchWindow))
	}
	if cfg.ShutdownBudget < 0 {
		errs = append(errs, fmt.Errorf("ShutdownBudget %v is negative", cfg.ShutdownBudget))
	}
	if cfg.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("CallTimeout %v is negative", cfg.CallTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("queue: consumer config: %w", errors.Join(errs...))
	}
	return nil
}
