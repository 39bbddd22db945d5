package persist

import (
	"fmt"

	gojson "github.com/goccy/go-json"

	"github.com/junban/junban/internal/event"
)

// DecodeResult decodes a results-queue message body into r, as encoding/json's Unmarshal
// would: the same values for the same input, an error for the same malformed input
// (only the wording of the error differs), unknown fields ignored. Decoding was the
// largest Go cost per result of the persist-worker after the SQS calls and the apply, so
// it uses go-json (BenchmarkDecodeResult measures it).
//
// The decoded strings refer to body instead of copies of it (go-json's
// DecodeNoCopyString), so body must not be modified while r is in use, and r keeps
// body alive: a queue.Message's body is the handler's own and lives as long as its
// batch anyway.
func DecodeResult(body []byte, r *event.Result) (err error) {
	// A decoder bug on some input must cost one message (poison), not its whole batch
	// (a panic in a batch handler retries every message of it until they dead-letter).
	defer func() {
		if p := recover(); p != nil {
			*r = event.Result{}
			err = fmt.Errorf("decoder panicked: %v", p)
		}
	}()
	return gojson.UnmarshalWithOption(body, r, gojson.DecodeNoCopyString())
}
