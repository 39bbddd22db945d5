package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	testStripeSecret    = "whsec_test_secret_for_vectors_0001"
	testStripeOldSecret = "whsec_old_secret_being_rolled_out_01"
	// The Standard Webhooks reference libraries' test key.
	testStandardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

func mustProvider(t testing.TB, name string, kind Kind, secrets ...string) Provider {
	t.Helper()
	p, err := NewProvider(name, kind, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Known answers computed by other implementations: the Standard Webhooks reference
// libraries' signing test, and Python's hmac for Stripe's scheme.
func TestKnownVectors(t *testing.T) {
	std := mustProvider(t, "std", KindStandard, testStandardSecret)
	h, err := std.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get(HeaderWebhookSig), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("standard signature %s, want %s", got, want)
	}
	st := mustProvider(t, "stripe", KindStripe, testStripeSecret)
	h, err = st.Sign("", time.Unix(1700000000, 0), []byte(`{"id":"evt_1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get(HeaderStripeSignature), "t=1700000000,v1=bd39bd0039bc51a3b73eb5a5b0967ae1b96a9567f0d3289d8ecdec821bbdd3e1"; got != want {
		t.Errorf("stripe signature %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	stripeNew := mustProvider(t, "stripe", KindStripe, testStripeSecret)
	stripeOld := mustProvider(t, "stripe", KindStripe, testStripeOldSecret)
	stripeBoth := mustProvider(t, "stripe", KindStripe, testStripeSecret, testStripeOldSecret)
	stdKey := mustProvider(t, "acme", KindStandard, testStandardSecret)
	stdOther := mustProvider(t, "acme", KindStandard, "whsec_"+strings.Repeat("QUJD", 8))
	stdBoth := mustProvider(t, "acme", KindStandard, "whsec_"+strings.Repeat("QUJD", 8), testStandardSecret)

	sign := func(p Provider, at time.Time, b []byte) http.Header {
		h, err := p.Sign("msg_1", at, b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tampered := bytes.Replace(body, []byte("evt_1"), []byte("evt_2"), 1)
	cases := []struct {
		name    string
		verify  Provider
		headers http.Header
		body    []byte
		want    error
	}{
		{"stripe ok", stripeNew, sign(stripeNew, now, body), body, nil},
		{"stripe wrong secret", stripeNew, sign(stripeOld, now, body), body, ErrSignatureMismatch},
		{"stripe rotated: old secret still accepted", stripeBoth, sign(stripeOld, now, body), body, nil},
		{"stripe rotated: new secret accepted", stripeBoth, sign(stripeNew, now, body), body, nil},
		{"stripe tampered body", stripeNew, sign(stripeNew, now, body), tampered, ErrSignatureMismatch},
		{"stripe stale", stripeNew, sign(stripeNew, now.Add(-5*time.Minute-time.Second), body), body, ErrTimestampTooOld},
		{"stripe future", stripeNew, sign(stripeNew, now.Add(5*time.Minute+time.Second), body), body, ErrTimestampTooNew},
		{"stripe edge of tolerance", stripeNew, sign(stripeNew, now.Add(-5*time.Minute), body), body, nil},
		{"stripe missing header", stripeNew, http.Header{}, body, ErrSignatureMissing},
		{"standard ok", stdKey, sign(stdKey, now, body), body, nil},
		{"standard wrong secret", stdKey, sign(stdOther, now, body), body, ErrSignatureMismatch},
		{"standard rotated", stdBoth, sign(stdKey, now, body), body, nil},
		{"standard tampered body", stdKey, sign(stdKey, now, body), tampered, ErrSignatureMismatch},
		{"standard stale", stdKey, sign(stdKey, now.Add(-6*time.Minute), body), body, ErrTimestampTooOld},
		{"standard future", stdKey, sign(stdKey, now.Add(6*time.Minute), body), body, ErrTimestampTooNew},
		{"standard missing headers", stdKey, http.Header{}, body, ErrSignatureMissing},
	}
	// A signed webhook-id may not be swapped: the id is part of the signed content.
	swapped := sign(stdKey, now, body)
	swapped.Set(HeaderWebhookID, "msg_2")
	cases = append(cases, struct {
		name    string
		verify  Provider
		headers http.Header
		body    []byte
		want    error
	}{"standard swapped id", stdKey, swapped, body, ErrSignatureMismatch})
	// Several signatures in one header: the one that matches wins.
	multi := sign(stdKey, now, body)
	multi.Set(HeaderWebhookSig, "v1a,AAAA v1,"+strings.Repeat("A", 43)+"= "+multi.Get(HeaderWebhookSig))
	stripeMulti := sign(stripeNew, now, body)
	stripeMulti.Set(HeaderStripeSignature, fmt.Sprintf("t=%d,v1=%s,%s,v0=00", now.Unix(), strings.Repeat("ab", 32),
		strings.TrimPrefix(stripeMulti.Get(HeaderStripeSignature), fmt.Sprintf("t=%d,", now.Unix()))))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.verify.Verify(c.headers, c.body, now, ToleranceDefault)
			if !errors.Is(err, c.want) || (c.want != nil && !errors.Is(err, ErrSignature)) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
	if s, err := stdKey.Verify(multi, body, now, ToleranceDefault); err != nil || s.ID != "msg_1" {
		t.Errorf("several standard signatures: %v %+v", err, s)
	}
	if _, err := stripeNew.Verify(stripeMulti, body, now, ToleranceDefault); err != nil {
		t.Errorf("several stripe signatures: %v", err)
	}
}

func TestParseSignatureHeaders(t *testing.T) {
	sig := strings.Repeat("ab", 32)
	for _, bad := range []string{"", "v1=" + sig, "t=1", "t=x,v1=" + sig, "t=1,t=2,v1=" + sig, "t=1,v1=zz"} {
		if _, _, err := ParseStripeSignature(bad); !errors.Is(err, ErrSignatureMalformed) {
			t.Errorf("ParseStripeSignature(%q): %v, want ErrSignatureMalformed", bad, err)
		}
	}
	ts, sigs, err := ParseStripeSignature(" t=12 , v1=" + sig + ",v0=" + sig + ",v1=" + sig)
	if err != nil || ts != 12 || len(sigs) != 2 {
		t.Errorf("good stripe header: %d %d %v", ts, len(sigs), err)
	}
	b64 := "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	for _, bad := range []string{"", "v1", "v2," + b64, "v1,!!!", "v1,AAAA"} {
		if _, err := ParseStandardSignature(bad); !errors.Is(err, ErrSignatureMalformed) {
			t.Errorf("ParseStandardSignature(%q): %v, want ErrSignatureMalformed", bad, err)
		}
	}
	if sigs, err := ParseStandardSignature("v1a,xyz  v1," + b64 + " v1," + b64); err != nil || len(sigs) != 2 {
		t.Errorf("good standard header: %d %v", len(sigs), err)
	}
}

// FuzzParseStripeSignature: the parser never panics, keeps only 32-byte signatures, and
// a header made by Sign always verifies.
func FuzzParseStripeSignature(f *testing.F) {
	for _, s := range []string{
		"t=1700000000,v1=bd39bd0039bc51a3b73eb5a5b0967ae1b96a9567f0d3289d8ecdec821bbdd3e1",
		"t=1,v1=" + strings.Repeat("00", 32) + ",v1=" + strings.Repeat("ff", 32) + ",v0=abc",
		"t=-5,v1=", "t=99999999999999999999", ",,,==,t==,v1==", "t=1,t=2", "",
	} {
		f.Add(s, []byte(`{"id":"evt_1"}`))
	}
	p := mustProvider(f, "stripe", KindStripe, testStripeSecret)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		_, sigs, err := ParseStripeSignature(header)
		if err == nil {
			for _, s := range sigs {
				if len(s) != 32 {
					t.Fatalf("signature of %d bytes kept", len(s))
				}
			}
		} else if !errors.Is(err, ErrSignatureMalformed) {
			t.Fatalf("error %v is not ErrSignatureMalformed", err)
		}
		now := time.Unix(1700000000, 0)
		h, _ := p.Sign("", now, body)
		if _, err := p.Verify(h, body, now, ToleranceDefault); err != nil {
			t.Fatalf("own signature rejected: %v", err)
		}
		h.Set(HeaderStripeSignature, header)
		p.Verify(h, body, now, ToleranceDefault) // must not panic
	})
}

// FuzzParseStandardSignature: as FuzzParseStripeSignature, for webhook-signature.
func FuzzParseStandardSignature(f *testing.F) {
	for _, s := range []string{
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		"v1a,abc v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=   v1,",
		"v1,,,", "v1 ,x", "", "\t\n v1,AAAA",
	} {
		f.Add(s, "msg_1", []byte(`{"test": 2432232314}`))
	}
	p := mustProvider(f, "acme", KindStandard, testStandardSecret)
	f.Fuzz(func(t *testing.T, header, id string, body []byte) {
		sigs, err := ParseStandardSignature(header)
		if err == nil {
			for _, s := range sigs {
				if len(s) != 32 {
					t.Fatalf("signature of %d bytes kept", len(s))
				}
			}
		} else if !errors.Is(err, ErrSignatureMalformed) {
			t.Fatalf("error %v is not ErrSignatureMalformed", err)
		}
		now := time.Unix(1614265330, 0)
		h, _ := p.Sign(id, now, body)
		if _, err := p.Verify(h, body, now, ToleranceDefault); err == nil && (h.Get(HeaderWebhookID) == "" || len(id) > MaxIDLength) {
			t.Fatalf("accepted without a usable webhook-id (%q)", id)
		} else if err != nil && h.Get(HeaderWebhookID) != "" && len(id) <= MaxIDLength {
			t.Fatalf("own signature rejected: %v", err)
		}
		h.Set(HeaderWebhookSig, header)
		p.Verify(h, body, now, ToleranceDefault) // must not panic
	})
}

// tamper flips one byte of b at pos (by flip, never 0) in a copy.
func tamper(b []byte, pos uint, flip byte) []byte {
	out := append([]byte(nil), b...)
	if flip == 0 {
		flip = 1
	}
	out[pos%uint(len(out))] ^= flip
	return out
}

// FuzzVerifyRefusesTampering: a delivery signed with the provider's key verifies; the same
// delivery with a byte of its body changed, a byte appended, a byte of its signature
// changed, another timestamp (still within the tolerance), another webhook-id, or signed
// with another key is refused with ErrSignatureMismatch. Nothing panics.
func FuzzVerifyRefusesTampering(f *testing.F) {
	for _, s := range []struct {
		stripe bool
		id     string
		body   string
	}{
		{true, "", `{"id":"evt_1","type":"payment_intent.succeeded","created":1795946400,"data":{"object":{"metadata":{"lcid":"LC-1"}}}}`},
		{false, "msg_p5jXN8AQM9LWM0D4loKWxJek", `{"test": 2432232314}`},
		{false, "m", ""},
		{true, "", "\x00\xff"},
	} {
		f.Add(s.stripe, s.id, []byte(s.body), uint(3), byte(0x20))
	}
	now := time.Unix(1700000000, 0)
	providers := map[bool][2]Provider{
		true:  {mustProvider(f, "stripe", KindStripe, testStripeSecret), mustProvider(f, "stripe", KindStripe, testStripeOldSecret)},
		false: {mustProvider(f, "acme", KindStandard, testStandardSecret), mustProvider(f, "acme", KindStandard, "whsec_"+strings.Repeat("QUJD", 8))},
	}
	f.Fuzz(func(t *testing.T, stripe bool, id string, body []byte, pos uint, flip byte) {
		p, other := providers[stripe][0], providers[stripe][1]
		if !stripe && (id == "" || len(id) >= MaxIDLength) {
			return // refused as malformed (TestVerify), and one byte must fit after it
		}
		h, err := p.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Verify(h, body, now, ToleranceDefault); err != nil {
			t.Fatalf("correctly signed delivery refused: %v", err)
		}
		refused := func(what string, h http.Header, b []byte) {
			t.Helper()
			if _, err := p.Verify(h, b, now, ToleranceDefault); !errors.Is(err, ErrSignatureMismatch) {
				t.Fatalf("%s: %v, want ErrSignatureMismatch", what, err)
			}
		}
		if len(body) > 0 {
			refused("body tampered", h, tamper(body, pos, flip))
		}
		refused("byte appended", h, append(append([]byte(nil), body...), ' '))
		hk, _ := other.Sign(id, now, body)
		refused("signed with another key", hk, body)
		sig := signatureHeader(p.Kind)
		switch p.Kind {
		case KindStripe:
			// The signature under a later timestamp: the timestamp is signed too.
			_, macs, _ := ParseStripeSignature(h.Get(sig))
			h2 := h.Clone()
			h2.Set(sig, fmt.Sprintf("t=%d,v1=%x", now.Unix()+1, macs[0]))
			refused("timestamp changed", h2, body)
			bad := append([]byte(nil), macs[0]...)
			bad[pos%uint(len(bad))] ^= max(flip, 1)
			h3 := h.Clone()
			h3.Set(sig, fmt.Sprintf("t=%d,v1=%x", now.Unix(), bad))
			refused("signature tampered", h3, body)
		case KindStandard:
			h2 := h.Clone()
			h2.Set(HeaderWebhookTime, strconv.FormatInt(now.Unix()+1, 10))
			refused("timestamp changed", h2, body)
			h3 := h.Clone()
			h3.Set(HeaderWebhookID, id+"x")
			refused("webhook-id changed", h3, body)
			macs, _ := ParseStandardSignature(h.Get(sig))
			bad := append([]byte(nil), macs[0]...)
			bad[pos%uint(len(bad))] ^= max(flip, 1)
			h4 := h.Clone()
			h4.Set(sig, "v1,"+base64.StdEncoding.EncodeToString(bad))
			refused("signature tampered", h4, body)
		}
	})
}

// signatureHeader is the header that carries kind's signatures.
func signatureHeader(k Kind) string {
	if k == KindStripe {
		return HeaderStripeSignature
	}
	return HeaderWebhookSig
}
