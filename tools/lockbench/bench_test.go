package lockbench

import (
	"context"
	"testing"
	"time"

	"github.com/junban/junban/internal/testenv"
)

// The benchmark runs end to end (briefly) and reports sane figures.
func TestRunSmoke(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	res, ms, err := Run(context.Background(), rc, Options{Duration: 300 * time.Millisecond, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		t.Log(m)
		if m.Events == 0 {
			t.Errorf("%s: no events", m.Name)
		}
	}
	if res.Hot.HandoffFairness <= 0 || res.Hot.HandoffDrainEPS <= 0 || res.Spread.UnlockedEPS <= 0 {
		t.Errorf("result %+v", res)
	}
}
