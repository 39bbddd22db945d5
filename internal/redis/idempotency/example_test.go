package idempotency_test

import (
	"context"
	"fmt"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/redis/idempotency"
)

// A webhook handler publishes one order event per provider event id, however often the
// provider delivers it.
func ExampleGuard_Do() {
	rc, _ := config.Redis{URL: "redis://127.0.0.1:6379/0"}.Client()
	g, _ := idempotency.New(idempotency.Config{Redis: rc, Prefix: "junban"})
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	res, err := g.Do(context.Background(), "stripe:evt_1", idempotency.Hash(body), func(ctx context.Context) ([]byte, error) {
		// publish the order event here; the record is written only if this succeeds
		return []byte(`{"outcome":"accepted"}`), nil
	})
	switch {
	case err != nil:
		fmt.Println("answer 409, 422 or 503:", err)
	case res.Replayed:
		fmt.Println("answer 200 with the first response:", string(res.Response))
	default:
		fmt.Println("answer 200:", string(res.Response))
	}
}
