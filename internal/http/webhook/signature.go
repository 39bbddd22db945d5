package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Signature headers.
const (
	HeaderStripeSignature = "Stripe-Signature"
	HeaderWebhookID       = "Webhook-Id"
	HeaderWebhookTime     = "Webhook-Timestamp"
	HeaderWebhookSig      = "Webhook-Signature"
)

// MaxIDLength bounds a provider event id (webhook-id or a Stripe event's id).
const MaxIDLength = 255

// Signature errors: each wraps ErrSignature, and the handler answers 401 to all.
var (
	ErrSignature          = errors.New("webhook: signature check failed")
	ErrSignatureMissing   = fmt.Errorf("%w: signature headers missing", ErrSignature)
	ErrSignatureMalformed = fmt.Errorf("%w: signature header malformed", ErrSignature)
	ErrSignatureMismatch  = fmt.Errorf("%w: no signature matches", ErrSignature)
	ErrTimestampTooOld    = fmt.Errorf("%w: timestamp too old", ErrSignature)
	ErrTimestampTooNew    = fmt.Errorf("%w: timestamp too far in the future", ErrSignature)
)

// Signed is what a verified signature vouches for.
type Signed struct {
	// ID is the webhook-id header (Standard Webhooks); empty for Stripe, whose event id
	// is in the signed body.
	ID string
	// Timestamp is the signed timestamp.
	Timestamp time.Time
}

// Verify checks the signature of body under h at now: the timestamp within tolerance
// (either way), then HMAC-SHA256 under each of the provider's keys, compared in
// constant time. Errors wrap ErrSignature.
func (p Provider) Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration) (Signed, error) {
	switch p.Kind {
	case KindStripe:
		return p.verifyStripe(h, body, now, tolerance)
	case KindStandard:
		return p.verifyStandard(h, body, now, tolerance)
	}
	return Signed{}, fmt.Errorf("%w: unknown kind %q", ErrSignature, p.Kind)
}

func checkTime(ts, now time.Time, tolerance time.Duration) error {
	// Sub saturates, so absurd timestamps land outside the tolerance too.
	d := now.Sub(ts)
	switch {
	case d > tolerance:
		return ErrTimestampTooOld
	case d < -tolerance:
		return ErrTimestampTooNew
	}
	return nil
}

func (p Provider) verifyStripe(h http.Header, body []byte, now time.Time, tolerance time.Duration) (Signed, error) {
	header := h.Get(HeaderStripeSignature)
	if header == "" {
		return Signed{}, ErrSignatureMissing
	}
	ts, sigs, err := ParseStripeSignature(header)
	if err != nil {
		return Signed{}, err
	}
	t := time.Unix(ts, 0)
	if err := checkTime(t, now, tolerance); err != nil {
		return Signed{}, err
	}
	for _, key := range p.keys {
		want := stripeMAC(key, ts, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return Signed{Timestamp: t}, nil
			}
		}
	}
	return Signed{}, ErrSignatureMismatch
}

func (p Provider) verifyStandard(h http.Header, body []byte, now time.Time, tolerance time.Duration) (Signed, error) {
	id, tsHeader, sigHeader := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTime), h.Get(HeaderWebhookSig)
	if id == "" || tsHeader == "" || sigHeader == "" {
		return Signed{}, ErrSignatureMissing
	}
	if len(id) > MaxIDLength {
		return Signed{}, fmt.Errorf("%w: webhook-id longer than %d", ErrSignatureMalformed, MaxIDLength)
	}
	ts, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return Signed{}, fmt.Errorf("%w: webhook-timestamp is not an integer", ErrSignatureMalformed)
	}
	sigs, err := ParseStandardSignature(sigHeader)
	if err != nil {
		return Signed{}, err
	}
	t := time.Unix(ts, 0)
	if err := checkTime(t, now, tolerance); err != nil {
		return Signed{}, err
	}
	for _, key := range p.keys {
		want := standardMAC(key, id, ts, body)
		for _, s := range sigs {
			if hmac.Equal(s, want) {
				return Signed{ID: id, Timestamp: t}, nil
			}
		}
	}
	return Signed{}, ErrSignatureMismatch
}

// ParseStripeSignature parses a Stripe-Signature header, "t=<unix>,v1=<hex>" with any
// number of v1 entries (Stripe sends one per active secret while one is rolled).
// Other schemes (v0) and v1 values that are not 32 bytes of hex are skipped; a header
// without exactly one integer t or without any usable v1 is malformed.
func ParseStripeSignature(header string) (ts int64, sigs [][]byte, err error) {
	haveT := false
	for item := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if haveT {
				return 0, nil, fmt.Errorf("%w: more than one t", ErrSignatureMalformed)
			}
			ts, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, nil, fmt.Errorf("%w: t is not an integer", ErrSignatureMalformed)
			}
			haveT = true
		case "v1":
			if len(v) != hex.EncodedLen(sha256.Size) {
				continue
			}
			b, err := hex.DecodeString(v)
			if err != nil {
				continue
			}
			sigs = append(sigs, b)
		}
	}
	if !haveT {
		return 0, nil, fmt.Errorf("%w: no t", ErrSignatureMalformed)
	}
	if len(sigs) == 0 {
		return 0, nil, fmt.Errorf("%w: no v1 signature", ErrSignatureMalformed)
	}
	return ts, sigs, nil
}

// ParseStandardSignature parses a webhook-signature header: space separated
// "<version>,<base64>" entries. Only v1 (HMAC-SHA256) entries of 32 bytes are kept;
// others (v1a, asymmetric) are skipped. A header without any usable v1 is malformed.
func ParseStandardSignature(header string) ([][]byte, error) {
	var sigs [][]byte
	for item := range strings.FieldsSeq(header) {
		version, sig, ok := strings.Cut(item, ",")
		if !ok || version != "v1" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			continue
		}
		sigs = append(sigs, b)
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("%w: no v1 signature", ErrSignatureMalformed)
	}
	return sigs, nil
}

func stripeMAC(key []byte, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

func standardMAC(key []byte, id string, ts int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the headers the provider would send for body: id is the webhook-id
// (Standard Webhooks only), signed with the provider's first (newest) key at ts. It
// serves junbanctl, junbanlab and tests; the gateway itself only verifies.
func (p Provider) Sign(id string, ts time.Time, body []byte) (http.Header, error) {
	if len(p.keys) == 0 {
		return nil, errors.New("webhook: provider has no key")
	}
	h := http.Header{}
	switch p.Kind {
	case KindStripe:
		mac := stripeMAC(p.keys[0], ts.Unix(), body)
		h.Set(HeaderStripeSignature, fmt.Sprintf("t=%d,v1=%s", ts.Unix(), hex.EncodeToString(mac)))
	case KindStandard:
		mac := standardMAC(p.keys[0], id, ts.Unix(), body)
		h.Set(HeaderWebhookID, id)
		h.Set(HeaderWebhookTime, strconv.FormatInt(ts.Unix(), 10))
		h.Set(HeaderWebhookSig, "v1,"+base64.StdEncoding.EncodeToString(mac))
	default:
		return nil, fmt.Errorf("webhook: unknown kind %q", p.Kind)
	}
	h.Set("Content-Type", "application/json")
	return h, nil
}
