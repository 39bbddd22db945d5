package order

import (
	"context"
	"time"

	"github.com/junban/junban/internal/event"
)

// Replay applies events through l the way the turns do, one entity at a time, each
// entity's events in the order given, and returns every entity's final state and the
// results. With ledger.Model as l it is the reference that tests compare a real run with.
func Replay(ctx context.Context, l Ledger, events []Event, now time.Time) (map[string]State, []event.Result, error) {
	states := map[string]State{}
	var all []event.Result
	arrival := map[string]int64{}
	for _, ev := range events {
		entity := ev.Entity()
		arrival[entity]++
		next, results, err := Step(ctx, l, states[entity], ev, arrival[entity], now)
		if err != nil {
			return nil, nil, err
		}
		states[entity] = next
		all = append(all, results...)
	}
	return states, all, nil
}
