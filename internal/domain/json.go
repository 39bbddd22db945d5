package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	gojson "github.com/goccy/go-json"
)

// The order-worker decodes every event at least twice (on receipt, to check it and find
// its turn, and again in the turn) and the order's state once a step: with encoding/json
// that was the largest Go cost of a step after the SQS calls and the Redis round trips.
// These decode with go-json instead, faster and with fewer allocations (BenchmarkDecodeEvent;
// docs/performance.md, "Decisions kept"), to the same values, with an
// error for the same inputs (only its wording differs): FuzzJSONAsEncodingJSON holds the
// two to that on events, envelopes and states, valid or not.

// unmarshal decodes data into v as encoding/json's Unmarshal would: unknown fields are
// ignored, names matched without regard to case, trailing data refused.
func unmarshal(data []byte, v any) (err error) {
	// A decoder bug on some input must refuse that message, not crash the process.
	defer recoverGoJSON(&err)
	return gojson.Unmarshal(data, v)
}

// unmarshalStrict decodes data into v as unmarshal does, and refuses an object member
// that v has no field for (encoding/json's Decoder.DisallowUnknownFields).
func unmarshalStrict(data []byte, v any) (err error) {
	defer recoverGoJSON(&err)
	dec := gojson.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	return noTrailingData(dec.Decode)
}

// noTrailingData refuses anything but white space after a decoder's value: decode, the
// decoder's Decode, must find the end of its input. (Decoder.More is no test of that: it
// reports false before a stray '}' or ']'.)
func noTrailingData(decode func(any) error) error {
	var rest json.RawMessage
	if err := decode(&rest); !errors.Is(err, io.EOF) {
		return errTrailingData
	}
	return nil
}

var errTrailingData = errors.New("trailing data after the JSON value")

func recoverGoJSON(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("go-json panicked: %v", p)
	}
}

// Marshal encodes v to the bytes encoding/json's Marshal gives, with go-json: the
// order-worker encodes the state and every result of each step, about three times faster
// this way (BenchmarkEncodeStep). FuzzJSONAsEncodingJSON holds the two encodings to the
// same bytes on every value it decodes.
func Marshal(v any) (out []byte, err error) {
	defer recoverGoJSON(&err)
	return gojson.Marshal(v)
}

// DecodeState decodes an order's or a SKU's state as the turn stored it.
func DecodeState(raw []byte) (State, error) {
	var st State
	err := unmarshal(raw, &st)
	return st, err
}
