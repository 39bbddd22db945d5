package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// FIFOSuffix ends the name of every FIFO queue: SQS requires it of a FIFO queue's name,
// and refuses it in a standard queue's.
const FIFOSuffix = ".fifo"

// IsFIFO reports whether a queue name or URL names a FIFO queue.
func IsFIFO(nameOrURL string) bool {
	return strings.HasSuffix(queueName(nameOrURL), FIFOSuffix)
}

var (
	// ErrNoGroupID: a message for a FIFO queue has no group id. It is refused before it
	// is sent (SQS would refuse it too, after the round trip).
	ErrNoGroupID = errors.New("queue: no message group id for a FIFO queue")
	// ErrNoDedupID: a message for a FIFO queue has no deduplication id. junban's queues
	// do not deduplicate by content, so SQS would refuse it; it is refused before.
	ErrNoDedupID = errors.New("queue: no deduplication id for a FIFO queue")
)

// Keys are a message's ids on a FIFO queue. A standard queue is sent neither.
type Keys struct {
	// Group is the MessageGroupId: SQS delivers one group's messages in the order they
	// were sent, and none of them while an earlier one is in flight.
	Group string
	// Dedup is the MessageDeduplicationId: a message sent within five minutes of an
	// accepted one with the same id is accepted and dropped.
	Dedup string
}

// Keyer derives a message's group and deduplication ids from its body. A Publisher to a
// FIFO queue needs one (PublisherConfig.Keys).
type Keyer func(body []byte) (group, dedup string, err error)

// For returns the MessageGroupId and MessageDeduplicationId of a send to the queue at
// queueURL: both nil for a standard queue; for a FIFO queue both as FIFOID makes them,
// or ErrNoGroupID / ErrNoDedupID when one is empty.
func (k Keys) For(queueURL string) (group, dedup *string, err error) {
	if !IsFIFO(queueURL) {
		return nil, nil, nil
	}
	switch {
	case k.Group == "":
		return nil, nil, fmt.Errorf("%w: %s", ErrNoGroupID, queueName(queueURL))
	case k.Dedup == "":
		return nil, nil, fmt.Errorf("%w: %s", ErrNoDedupID, queueName(queueURL))
	}
	return aws.String(FIFOID(k.Group)), aws.String(FIFOID(k.Dedup)), nil
}

// maxFIFOIDLen is SQS's bound on a group or deduplication id.
const maxFIFOIDLen = 128

// fifoHashPrefix begins an id FIFOID hashed. An id that begins with it is hashed too, so
// that no id passed as it is can equal another one's hash.
const fifoHashPrefix = "sha256:"

// FIFOID returns s as SQS takes a group or deduplication id: s itself when it is 1..128
// characters of ASCII letters, digits and punctuation (not beginning with "sha256:"),
// otherwise "sha256:" and the hex SHA-256 of s. junban's ids may be 255 bytes long and
// hold any printable character (a space, a non-ASCII letter); the mapping is one to one
// all the same (but for hash collisions), so an entity keeps its group and two events
// never share a deduplication id.
func FIFOID(s string) string {
	if len(s) >= 1 && len(s) <= maxFIFOIDLen && !strings.HasPrefix(s, fifoHashPrefix) && sqsIDChars(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return fifoHashPrefix + hex.EncodeToString(sum[:])
}

// sqsIDChars reports whether s holds only what SQS allows in a group or deduplication id:
// ASCII letters, digits and punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
func sqsIDChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}
