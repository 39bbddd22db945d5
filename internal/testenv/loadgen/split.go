package loadgen

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"sync"
)

// Split sends a share of the events through one publisher (an SNS topic the orders queue
// is subscribed to) and the rest through another (the orders queue itself). Which way an
// event goes depends on its body alone, so a run is the same run every time.
type Split struct {
	// Queue takes the events that do not go through Other.
	Queue Publisher
	// Other takes Share of them.
	Other Publisher
	// Share, within [0, 1], of the events that go through Other.
	Share float64
}

// PublishBatch sends each of bodies through the publisher its hash picks, both parts at once.
func (s Split) PublishBatch(ctx context.Context, bodies [][]byte) error {
	var direct, other [][]byte
	for _, b := range bodies {
		if s.viaOther(b) {
			other = append(other, b)
		} else {
			direct = append(direct, b)
		}
	}
	var errDirect, errOther error
	var wg sync.WaitGroup
	if len(other) > 0 {
		wg.Go(func() { errOther = s.Other.PublishBatch(ctx, other) })
	}
	if len(direct) > 0 {
		errDirect = s.Queue.PublishBatch(ctx, direct)
	}
	wg.Wait()
	return errors.Join(errDirect, errOther)
}

func (s Split) viaOther(body []byte) bool {
	if s.Share <= 0 {
		return false
	}
	h := fnv.New32a()
	h.Write(body)
	return float64(h.Sum32()) < s.Share*math.MaxUint32
}
