package dlq

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/queue"
)

// route is one of junban's dead-letter queues and the queue it serves. A redrive takes
// from dlq and sends to served, and nowhere else: what a message says of itself (its
// junban-source-queue attribute, its body) never chooses the queue, since anyone who can
// send to a DLQ could otherwise put a body of their choosing on a queue whose consumer
// trusts it (a result on the results queue is written to PostgreSQL as it is).
type route struct {
	// dlq and served are the queues as the configuration names them (a name or a URL).
	dlq, served string
	// dlqURL and servedURL are their URLs.
	dlqURL, servedURL string
}

// routes returns junban's dead-letter queues, each with the queue it serves:
// JUNBAN_ORDERS_DLQ serves JUNBAN_ORDERS_QUEUE, JUNBAN_RESULTS_DLQ JUNBAN_RESULTS_QUEUE.
func routes(cfg config.SQS) []route {
	var rs []route
	for _, r := range []route{{dlq: cfg.OrdersDLQ, served: cfg.OrdersQueue}, {dlq: cfg.ResultsDLQ, served: cfg.ResultsQueue}} {
		if r.dlq != "" {
			rs = append(rs, r)
		}
	}
	return rs
}

// resolver turns a queue name into its URL and returns a URL as it is (queue.ResolveURL).
type resolver func(ctx context.Context, nameOrURL string) (string, error)

// sqsResolver resolves names with c.
func sqsResolver(c *sqs.Client) resolver {
	return func(ctx context.Context, nameOrURL string) (string, error) {
		return queue.ResolveURL(ctx, c, nameOrURL)
	}
}

// queueName is the name a queue's configured name or URL ends in.
func queueName(nameOrURL string) string {
	return nameOrURL[strings.LastIndexByte(nameOrURL, '/')+1:]
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// names reports whether given names the queue the configuration names conf, whose URL
// is url ("" when not resolved): conf itself, the queue name conf ends in, or url. A URL
// that is neither conf nor url names no configured queue even when it ends in the same
// name: it is a queue of another host or account.
func names(given, conf, url string) bool {
	if given == "" || conf == "" {
		return false
	}
	return given == conf || given == queueName(conf) || (url != "" && given == url)
}

// findRoute returns the route of the dead-letter queue given (a name or a URL) with both
// URLs resolved, or ErrBadTarget when given is none of junban's dead-letter queues.
func findRoute(ctx context.Context, cfg config.SQS, given string, resolve resolver) (route, error) {
	rs := routes(cfg)
	for _, r := range rs {
		if names(given, r.dlq, "") {
			return resolveRoute(ctx, r, resolve)
		}
	}
	if isURL(given) {
		// A URL names a configured DLQ only when it is that DLQ's URL.
		for _, r := range rs {
			u, err := resolve(ctx, r.dlq)
			if err != nil {
				return route{}, err
			}
			if names(given, r.dlq, u) {
				return resolveRoute(ctx, r, resolve)
			}
		}
	}
	return route{}, fmt.Errorf("%w: %q is not one of junban's dead-letter queues (JUNBAN_ORDERS_DLQ %q, JUNBAN_RESULTS_DLQ %q)",
		ErrBadTarget, given, cfg.OrdersDLQ, cfg.ResultsDLQ)
}

func resolveRoute(ctx context.Context, r route, resolve resolver) (route, error) {
	if r.served == "" {
		return route{}, fmt.Errorf("%w: the queue %q serves is not configured", ErrBadTarget, r.dlq)
	}
	var err error
	if r.dlqURL, err = resolve(ctx, r.dlq); err != nil {
		return route{}, err
	}
	if r.servedURL, err = resolve(ctx, r.served); err != nil {
		return route{}, err
	}
	return r, nil
}

// checkTo accepts a target asked for only when it names the queue the DLQ serves (or is
// empty): a dead-letter queue redrives only to the queue it serves, never to the other
// main queue, whose consumer would trust a body of the wrong kind.
func (r route) checkTo(to string) error {
	if to == "" || names(to, r.served, r.servedURL) {
		return nil
	}
	return fmt.Errorf("%w: %q: %s redrives only to the queue it serves, %q (or give no target)", ErrBadTarget, to, queueName(r.dlq), r.served)
}

// openRoute finds the route of the dead-letter queue dlq and checks to against it, and
// returns it with the DLQ's depth. The queue it serves must exist and must not be the
// DLQ itself (compared by ARN, so that a name and a URL of one queue are found equal).
func openRoute(ctx context.Context, c *sqs.Client, cfg config.SQS, dlq, to string) (route, int, error) {
	r, err := findRoute(ctx, cfg, dlq, sqsResolver(c))
	if err != nil {
		return route{}, 0, err
	}
	if err := r.checkTo(to); err != nil {
		return route{}, 0, err
	}
	dlqARN, depth, err := QueueState(ctx, c, r.dlqURL)
	if err != nil {
		return route{}, 0, err
	}
	servedARN, _, err := QueueState(ctx, c, r.servedURL)
	if err != nil {
		return route{}, 0, err
	}
	if servedARN == dlqARN {
		return route{}, 0, fmt.Errorf("%w: %w: %s is configured as the queue %s serves", ErrBadTarget, ErrRedriveIntoDLQ, r.served, r.dlq)
	}
	return r, depth, nil
}
