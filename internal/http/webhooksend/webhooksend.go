// Package webhooksend delivers signed webhooks to a running gateway as a payment provider
// would: the body the provider sends, signed afresh on every attempt. junbanctl's webhook
// send and storm and junbanlab's loadgen deliver through it.
package webhooksend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/junban/junban/internal/http/webhook"
	"github.com/junban/junban/internal/platform/cli"
	"github.com/junban/junban/internal/platform/config"
)

// StripeAPIVersion is the api_version of the Stripe events Body writes: the version of
// the stripe-go release the tests parse them with (stripe.APIVersion of v82), so that
// webhook.ConstructEvent, which refuses an event of another release train, accepts them.
const StripeAPIVersion = "2025-08-27.basil"

// PaymentSucceeded is the event type a provider of kind sends when a payment succeeded.
func PaymentSucceeded(kind webhook.Kind) string {
	return map[webhook.Kind]string{webhook.KindStripe: "payment_intent.succeeded", webhook.KindStandard: "payment.succeeded"}[kind]
}

// Provider finds provider name's kind and secret: kind and secret when both are given,
// else the gateway's own JUNBAN_WEBHOOK_PROVIDERS (environment or the stack file), where
// a given kind must match and a given secret replaces the provider's. A provider that
// cannot be found is a usage error (cli.ErrUsage).
func Provider(name, kind, secret string) (webhook.Provider, error) {
	if kind != "" && secret != "" {
		return webhook.NewProvider(name, webhook.Kind(kind), secret)
	}
	if err := config.LoadStackEnv(); err != nil {
		return webhook.Provider{}, err
	}
	spec := os.Getenv("JUNBAN_WEBHOOK_PROVIDERS")
	if spec == "" {
		return webhook.Provider{}, fmt.Errorf("%w: give -kind and -secret, or set JUNBAN_WEBHOOK_PROVIDERS", cli.ErrUsage)
	}
	ps, err := webhook.ParseProviders(spec)
	if err != nil {
		return webhook.Provider{}, err
	}
	for _, p := range ps {
		if p.Name != name {
			continue
		}
		if kind != "" && webhook.Kind(kind) != p.Kind {
			return webhook.Provider{}, fmt.Errorf("%w: -kind %s, but %s is %s in JUNBAN_WEBHOOK_PROVIDERS", cli.ErrUsage, kind, p.Name, p.Kind)
		}
		if secret != "" {
			return webhook.NewProvider(p.Name, p.Kind, secret)
		}
		return p, nil
	}
	return webhook.Provider{}, fmt.Errorf("%w: provider %q is not in JUNBAN_WEBHOOK_PROVIDERS", cli.ErrUsage, name)
}

// Body is the body a provider of kind sends for ev. For Stripe it is a whole event as
// Stripe sends it (object, api_version, livemode, pending_webhooks, request, data.object
// with its own object type), so a consumer built on a Stripe SDK parses it too; the
// gateway reads only the fields webhook.Encode writes.
func Body(kind webhook.Kind, ev webhook.ProviderEvent) ([]byte, error) {
	body, err := webhook.Encode(kind, ev)
	if err != nil || kind != webhook.KindStripe {
		return body, err
	}
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	e["api_version"] = StripeAPIVersion
	e["livemode"] = false
	e["pending_webhooks"] = 1
	e["request"] = map[string]any{"id": nil, "idempotency_key": nil}
	if data, ok := e["data"].(map[string]any); ok {
		if obj, ok := data["object"].(map[string]any); ok {
			// The object's type is the event type's first part: payment_intent.succeeded
			// carries a payment_intent, charge.refunded a charge.
			typ, _, _ := strings.Cut(ev.Type, ".")
			obj["object"] = typ
			obj["created"] = ev.OccurredAt.Unix()
			obj["livemode"] = false
			if typ == "payment_intent" && strings.HasSuffix(ev.Type, ".succeeded") {
				obj["status"] = "succeeded"
				obj["amount_received"] = ev.Amount
			}
		}
	}
	return json.Marshal(e)
}

// Request is a signed delivery that can be sent again and again.
type Request struct {
	// URL is where it is posted: the gateway's base URL and /webhooks/<provider>.
	URL string
	// Provider signs it.
	Provider webhook.Provider
	// ID is the webhook-id (Standard Webhooks) or the Stripe event's id.
	ID string
	// Body is what is signed and posted.
	Body []byte
	// Skew moves the signing clock: a stale or future timestamp.
	Skew time.Duration
	// Client posts it.
	Client *http.Client
}

// Answer is the gateway's answer to one delivery.
type Answer struct {
	// Code is the HTTP status.
	Code int
	// Body is the answer's body.
	Body []byte
	// Replayed is true when the gateway answered with the response of an earlier delivery.
	Replayed bool
}

// Send signs afresh (a provider's retry carries a new timestamp) and posts.
func (r *Request) Send(ctx context.Context) (Answer, error) {
	h, err := r.Provider.Sign(r.ID, time.Now().Add(r.Skew), r.Body)
	if err != nil {
		return Answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return Answer{}, err
	}
	req.Header = h
	resp, err := r.Client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Answer{Code: resp.StatusCode, Body: b, Replayed: resp.Header.Get(webhook.HeaderReplayed) == "true"}, err
}
