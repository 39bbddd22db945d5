package lockhandoff_test

import (
	"context"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/junban/junban/internal/lockhandoff"
	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

// An SQS consumer hands each order event to Submit and deletes its message when Submit
// returns without error; a drain message's consumer calls Resume.
func Example() {
	rc, prefix, cleanup, err := exampleRedis()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	var h *lockhandoff.Handoff
	h, err = lockhandoff.New(lockhandoff.Config{
		Redis:  rc,
		Prefix: prefix,
		// The order-worker sends a drain message here; its consumer calls h.Resume.
		Nudge: func(ctx context.Context, lcid string) error { return h.Resume(ctx, lcid) },
		// The order-worker's handler, order's Processor, quarantines too.
		NeverQuarantine: true,
		Handler: lockhandoff.StepFunc(func(ctx context.Context, t lockhandoff.Turn, envelope []byte) (lockhandoff.Result, error) {
			// Apply the event, fencing writes with t.Token (GET lock == token) in the script.
			fmt.Printf("%s seq %d: %s\n", t.Entity, t.Seq, envelope)
			return lockhandoff.Result{}, nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = h.Stop(context.Background()) }()

	for _, body := range []string{"order.placed", "payment.confirmed"} {
		out, err := h.Submit(ctx, "LC-000123", []byte(body))
		if err != nil {
			fmt.Println("keep the message, SQS redelivers it:", err)
			continue
		}
		fmt.Println(out) // delete the SQS message
	}
	// Output:
	// LC-000123 seq 1: order.placed
	// turn
	// LC-000123 seq 2: payment.confirmed
	// turn
}

// A handler publishes the entity's results list and returns the trim of what it published: the
// trim runs in the script of the turn's next step (the handoff or the release), only while
// the turn is still this holder's, and the envelope leaves proc in the same script.
func ExampleTurn_Trim() {
	rc, prefix, cleanup, err := exampleRedis()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cleanup()

	ctx := context.Background()
	outbox := lockhandoff.Key(prefix, "LC-000124", "outbox") // the entity's hash tag
	rc.RPush(ctx, outbox, "order.accepted", "order.shipped")
	h, err := lockhandoff.New(lockhandoff.Config{
		Redis:           rc,
		Prefix:          prefix,
		NeverQuarantine: true,
		Handler: lockhandoff.StepFunc(func(ctx context.Context, t lockhandoff.Turn, envelope []byte) (lockhandoff.Result, error) {
			items, err := rc.LRange(ctx, outbox, 0, -1).Result()
			if err != nil {
				return lockhandoff.Result{}, err
			}
			fmt.Println("published:", items) // to SQS, say
			trim, err := t.Trim(outbox, len(items))
			return lockhandoff.Result{Trims: []lockhandoff.Trim{trim}}, err
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = h.Stop(context.Background()) }()
	if _, err := h.Submit(ctx, "LC-000124", []byte("shipped")); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("left:", rc.LLen(ctx, outbox).Val())
	// Output:
	// published: [order.accepted order.shipped]
	// left: 0
}

// exampleRedis connects to the stack's Redis (scripts/stack.sh) and gives the example a
// key prefix of its own; cleanup deletes its keys and closes the client.
func exampleRedis() (rc *redis.Client, prefix string, cleanup func(), err error) {
	config.LoadStackEnv()
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return nil, "", nil, err
	}
	rc = redis.NewClient(opt)
	prefix = "example_" + testenv.ID()
	return rc, prefix, func() {
		keys, _ := rc.Keys(context.Background(), prefix+"*").Result()
		for _, k := range keys {
			rc.Del(context.Background(), k)
		}
		rc.Close()
	}, nil
}
