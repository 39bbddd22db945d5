package loadgen

import (
	"context"
	"fmt"
	"math"
	"testing"
)

type countingPublisher struct{ bodies [][]byte }

func (c *countingPublisher) PublishBatch(_ context.Context, bodies [][]byte) error {
	c.bodies = append(c.bodies, bodies...)
	return nil
}

// Split sends about Share of the events the other way, each event the same way every time.
func TestSplitSendsItsShareTheOtherWay(t *testing.T) {
	var bodies [][]byte
	for i := range 2000 {
		bodies = append(bodies, fmt.Appendf(nil, `{"event_id":"e-%d","type":"order.placed"}`, i))
	}
	for _, share := range []float64{0, 0.2, 1} {
		q, o := &countingPublisher{}, &countingPublisher{}
		s := Split{Queue: q, Other: o, Share: share}
		for i := 0; i < len(bodies); i += 10 {
			if err := s.PublishBatch(context.Background(), bodies[i:i+10]); err != nil {
				t.Fatal(err)
			}
		}
		if len(q.bodies)+len(o.bodies) != len(bodies) {
			t.Fatalf("share %v: %d + %d of %d sent", share, len(q.bodies), len(o.bodies), len(bodies))
		}
		if got := float64(len(o.bodies)) / float64(len(bodies)); math.Abs(got-share) > 0.04 {
			t.Errorf("share %v: %.3f went the other way", share, got)
		}
		for _, b := range o.bodies {
			if !s.viaOther(b) {
				t.Fatalf("share %v: %s went the other way, but would not again", share, b)
			}
		}
	}
}
