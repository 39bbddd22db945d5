package domain

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/junban/junban/internal/event"
)

// Replay applies events through l the way the turns do, one entity at a time, each
// entity's events in the order given, and returns every entity's final state and the
// results. With stock.Model as l it is the reference that tests compare a real run with;
// pol is the run's (its reservation TTL), and the order.reservation_expired events the run's
// workers submitted are among events, where they reached their turns.
func Replay(ctx context.Context, l Ledger, pol Policy, events []Event, now time.Time) (map[string]State, []event.Result, error) {
	states := map[string]State{}
	var all []event.Result
	arrival := map[string]int64{}
	for _, ev := range events {
		entity := ev.Entity()
		arrival[entity]++
		next, results, err := Step(ctx, l, pol, states[entity], ev, arrival[entity], now)
		if err != nil {
			return nil, nil, err
		}
		states[entity] = next
		all = append(all, results...)
	}
	return states, all, nil
}

// InArrivalOrder returns the events of results (looked up by id in sent) one entity at a
// time, each entity's in the order they reached its turn (Result.Arrival): the order in
// which Replay reproduces a real run. An id missing from sent is an error.
func InArrivalOrder(results []event.Result, sent map[string]event.Order) ([]Event, error) {
	rs := slices.Clone(results)
	slices.SortFunc(rs, func(a, b event.Result) int {
		if c := strings.Compare(a.Entity, b.Entity); c != 0 {
			return c
		}
		return cmp.Compare(a.Arrival, b.Arrival)
	})
	events := make([]Event, 0, len(rs))
	for _, r := range rs {
		o, ok := sent[r.EventID]
		if !ok {
			return nil, fmt.Errorf("order: result for an event never sent: %s", r.EventID)
		}
		body, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		ev, err := Decode(body, 0)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	return events, nil
}
