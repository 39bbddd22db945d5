package outbound

import (
	"errors"
	"strings"
	"time"
)

// Defaults of the outbound settings.
const (
	// RetentionDefault is how long a row stays in the outbox (and GET /v1/events serves it).
	RetentionDefault = 7 * 24 * time.Hour
	// LowStockThresholdDefault is the low-stock threshold of a SKU that has none of its own.
	LowStockThresholdDefault = 10
	// PollDefault is how often an idle relay looks for rows it was not told of.
	PollDefault = 250 * time.Millisecond
	// PublishersDefault is how many PublishBatch calls a relay has in flight (an entity's
	// messages always go through one of them, in seq order).
	PublishersDefault = 4
	// RoundMaxDefault is the most rows one relay round reads and publishes.
	RoundMaxDefault = 500
)

// Config is the persist-worker's outbound settings (its environment).
type Config struct {
	// Enabled writes outbound events into the outbox. A topic turns it on too.
	Enabled bool `env:"JUNBAN_OUTBOX"`
	// TopicARN is the SNS topic the relay publishes to (standard or FIFO); empty: no relay.
	TopicARN string `env:"JUNBAN_OUTBOX_TOPIC_ARN"`
	// Retention is how long a row is kept: published rows (or every row, without a topic)
	// older than this are deleted.
	Retention time.Duration `env:"JUNBAN_OUTBOX_RETENTION"`
	// LowStockThreshold is the threshold of a SKU without its own (skus.low_stock_threshold).
	LowStockThreshold int64 `env:"JUNBAN_STOCK_LOW_THRESHOLD"`
	// Poll is how often an idle relay looks for rows.
	Poll time.Duration `env:"JUNBAN_OUTBOX_POLL"`
	// Publishers is how many PublishBatch calls a relay has in flight.
	Publishers int `env:"JUNBAN_OUTBOX_PUBLISHERS"`
	// RoundMax is the most rows one relay round publishes.
	RoundMax int `env:"JUNBAN_OUTBOX_ROUND_MAX"`
}

// SetDefaults sets every default.
func (c *Config) SetDefaults() {
	c.Retention = RetentionDefault
	c.LowStockThreshold = LowStockThresholdDefault
	c.Poll = PollDefault
	c.Publishers = PublishersDefault
	c.RoundMax = RoundMaxDefault
}

// On tells whether outbound events are written.
func (c Config) On() bool { return c.Enabled || c.TopicARN != "" }

// FIFO tells whether the topic is a FIFO topic (its name ends in ".fifo").
func (c Config) FIFO() bool { return strings.HasSuffix(c.TopicARN, ".fifo") }

// Validate checks what the parser cannot.
func (c Config) Validate() error {
	var p []error
	if c.TopicARN != "" && !strings.HasPrefix(c.TopicARN, "arn:") {
		p = append(p, errors.New("JUNBAN_OUTBOX_TOPIC_ARN: must be a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)"))
	}
	if c.Retention < time.Hour {
		p = append(p, errors.New("JUNBAN_OUTBOX_RETENTION: must be at least 1h"))
	}
	if c.LowStockThreshold < 0 {
		p = append(p, errors.New("JUNBAN_STOCK_LOW_THRESHOLD: must not be negative"))
	}
	if c.Poll < 10*time.Millisecond {
		p = append(p, errors.New("JUNBAN_OUTBOX_POLL: must be at least 10ms"))
	}
	if c.Publishers < 1 || c.Publishers > 64 {
		p = append(p, errors.New("JUNBAN_OUTBOX_PUBLISHERS: must be 1..64"))
	}
	if c.RoundMax < 10 || c.RoundMax > 10000 {
		p = append(p, errors.New("JUNBAN_OUTBOX_ROUND_MAX: must be 10..10000"))
	}
	return errors.Join(p...)
}
