package dlq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/junban/junban/internal/platform/config"
)

// fakeEndpoint is where mapResolver's queues live.
const fakeEndpoint = "http://sqs.local:4566/000000000000/"

// mapResolver resolves a name as an SQS endpoint would, without one.
func mapResolver(_ context.Context, nameOrURL string) (string, error) {
	if isURL(nameOrURL) {
		return nameOrURL, nil
	}
	if nameOrURL == "" || strings.ContainsAny(nameOrURL, "/ ") {
		return "", errors.New("no such queue")
	}
	return fakeEndpoint + nameOrURL, nil
}

// testConfigs are junban's queues named by name, and by URL.
var testConfigs = []config.SQS{
	{OrdersQueue: "orders", OrdersDLQ: "orders-dlq", ResultsQueue: "results", ResultsDLQ: "results-dlq"},
	{OrdersQueue: fakeEndpoint + "orders", OrdersDLQ: fakeEndpoint + "orders-dlq", ResultsQueue: fakeEndpoint + "results", ResultsDLQ: fakeEndpoint + "results-dlq"},
}

// Each of junban's DLQs, by name or URL, routes to the queue it serves and to nothing
// else; a DLQ that is not junban's, however it is named, has no route. Broken variant
// tried: names comparing the queue names alone (the last element of a URL) accepted a
// foreign URL ending in the same name and "../orders", here and in FuzzRoute's seeds.
func TestRouteIsTheServedQueue(t *testing.T) {
	for _, cfg := range testConfigs {
		for _, tc := range []struct{ dlq, served string }{
			{"orders-dlq", "orders"}, {fakeEndpoint + "orders-dlq", "orders"},
			{"results-dlq", "results"}, {fakeEndpoint + "results-dlq", "results"},
		} {
			r, err := findRoute(context.Background(), cfg, tc.dlq, mapResolver)
			if err != nil || r.servedURL != fakeEndpoint+tc.served || r.dlqURL != fakeEndpoint+queueName(tc.dlq) {
				t.Fatalf("route of %q with %+v: %+v %v; want %s", tc.dlq, cfg, r, err, tc.served)
			}
			for _, to := range []string{"", tc.served, fakeEndpoint + tc.served} {
				if err := r.checkTo(to); err != nil {
					t.Errorf("%s to %q: %v", tc.dlq, to, err)
				}
			}
			other := map[string]string{"orders": "results", "results": "orders"}[tc.served]
			for _, to := range []string{other, fakeEndpoint + other, tc.served + "-dlq", other + "-dlq", "elsewhere",
				"https://sqs.attacker.example/999999999999/" + tc.served, tc.served + "/", " " + tc.served} {
				if err := r.checkTo(to); !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), fmt.Sprintf("%q", r.served)) {
					t.Errorf("%s to %q: %v; want ErrBadTarget naming %q", tc.dlq, to, err, r.served)
				}
			}
		}
		for _, dlq := range []string{"orders", "results", "x-dlq", "", "https://sqs.attacker.example/999999999999/orders-dlq", "orders-dlq/", "ORDERS-DLQ"} {
			if r, err := findRoute(context.Background(), cfg, dlq, mapResolver); !errors.Is(err, ErrBadTarget) {
				t.Errorf("route of %q with %+v: %+v %v; want ErrBadTarget", dlq, cfg, r, err)
			}
		}
	}
}

// FuzzRoute: for any DLQ and target given, a route is found only for one of junban's
// DLQs and leads to the queue that DLQ serves; a target is accepted only when it is empty
// or names that queue; everything else is ErrBadTarget, and a refused target's error
// names the queue allowed.
func FuzzRoute(f *testing.F) {
	for _, s := range [][2]string{
		{"orders-dlq", ""}, {"orders-dlq", "orders"}, {"orders-dlq", "results"}, {"results-dlq", "orders"},
		{"orders-dlq", fakeEndpoint + "results"}, {fakeEndpoint + "orders-dlq", fakeEndpoint + "orders"},
		{"orders-dlq", "https://sqs.attacker.example/999999999999/orders"}, {"https://sqs.attacker.example/1/orders-dlq", "orders"},
		{"x-dlq", "x"}, {"orders-dlq", "orders-dlq"}, {"", ""}, {"/", "/"}, {"orders-dlq", "../orders"},
		{"orders-dlq\x00", "orders\xff"}, {"http://", "https://"},
	} {
		f.Add(s[0], s[1], false)
		f.Add(s[0], s[1], true)
	}
	f.Fuzz(func(t *testing.T, dlq, to string, byURL bool) {
		cfg := testConfigs[0]
		if byURL {
			cfg = testConfigs[1]
		}
		r, err := findRoute(context.Background(), cfg, dlq, mapResolver)
		var served string
		switch dlq {
		case "orders-dlq", fakeEndpoint + "orders-dlq":
			served = "orders"
		case "results-dlq", fakeEndpoint + "results-dlq":
			served = "results"
		default:
			if !errors.Is(err, ErrBadTarget) {
				t.Fatalf("route of %q: %+v %v; want ErrBadTarget", dlq, r, err)
			}
			return
		}
		if err != nil || r.servedURL != fakeEndpoint+served {
			t.Fatalf("route of %q: %+v %v; want %s", dlq, r, err, served)
		}
		err = r.checkTo(to)
		switch to {
		case "", served, fakeEndpoint + served:
			if err != nil {
				t.Fatalf("%s to %q: %v", dlq, to, err)
			}
		default:
			if !errors.Is(err, ErrBadTarget) || !strings.Contains(err.Error(), fmt.Sprintf("%q", r.served)) {
				t.Fatalf("%s to %q: %v; want ErrBadTarget naming %q", dlq, to, err, r.served)
			}
		}
	})
}
