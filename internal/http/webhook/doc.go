// Package webhook receives payment providers' signed webhooks and turns each provider
// event into exactly one junban order event (docs/webhooks.md).
//
// A delivery goes through a size limit, the signature check (Provider.Verify: Stripe's
// "t=...,v1=..." header or Standard Webhooks' webhook-id/-timestamp/-signature;
// HMAC-SHA256 compared in constant time, several secrets for rotation, a timestamp
// tolerance either way, the clock injected), payload parsing into a ProviderEvent
// (Parse), the mapping table (Routes, Map), the idempotency guard keyed by provider and
// provider event id, and the publish to the orders queue; Handler answers with the
// status codes the providers' retry logic expects.
//
// The signatures are verified here rather than with the Standard Webhooks reference
// library (github.com/standard-webhooks/standard-webhooks/libraries, v0.0.1): it reads
// time.Now and a package-level tolerance (no injected clock), takes one secret per
// verifier, and has no Stripe scheme, so the gateway would still need most of this
// code. TestKnownVectors checks this implementation against the reference libraries'
// published signing vector.
package webhook
