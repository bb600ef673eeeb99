package lab_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// TestTimelineOfTheStorm: the report's timeline of a storm has a lane for
// every delivery the platform made (the copies at once, then the late
// retries), answered processed (drawn as effects) or duplicate (absorbed).
// The fixed handler processes one; the broken one more, every one after
// the first marked a duplicate.
func TestTimelineOfTheStorm(t *testing.T) {
	for _, sc := range paymentlab.Scenarios() {
		t.Run(sc.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			env := labEnv(t)
			env.Timeline = lab.NewTimeline()
			res, err := sc.Run(ctx, env)
			if err != nil {
				t.Fatal(err)
			}
			byKind := map[string]int{}
			for _, e := range env.Timeline.Events() {
				byKind[e.Kind]++
			}
			if n := env.Timeline.Len(); n < paymentlab.StormCopies+paymentlab.LateRetries {
				t.Errorf("%d deliveries on the timeline, want at least %d", n, paymentlab.StormCopies+paymentlab.LateRetries)
			}
			if env.Timeline.Caption() == "" {
				t.Error("no caption naming the storm shown")
			}
			if byKind[lab.KindEffect] != 1 {
				t.Errorf("%d effects drawn, want the one that counted (%v)", byKind[lab.KindEffect], byKind)
			}
			switch sc.Variant {
			case lab.Fixed:
				if byKind[lab.KindDuplicate] != 0 || byKind[lab.KindAbsorbed] < paymentlab.StormCopies+paymentlab.LateRetries-1 {
					t.Errorf("fixed: %v, want every other delivery absorbed", byKind)
				}
			case lab.Broken:
				if byKind[lab.KindDuplicate] == 0 || byKind[lab.KindDuplicate]+1 > res.Count {
					t.Errorf("broken: %v for %d records, want duplicates, no more than the records", byKind, res.Count)
				}
			}
		})
	}
}
