package lab_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

// kinds counts a timeline's events by kind, and by actor and kind.
func kinds(events []lab.Event) (map[string]int, map[string]string) {
	byKind, byActor := map[string]int{}, map[string]string{}
	for _, e := range events {
		byKind[e.Kind]++
		byActor[e.Actor] = e.Kind
	}
	return byKind, byActor
}

// TestTimelineOfTheLostAck: the report's timeline of the lost COMMIT ACK
// tells the story the ledger counts. Broken: the first attempt's deduction,
// the lost ACK, and the retry's second deduction marked the duplicate.
// Fixed: the same first attempt and lost ACK, then a retry job with nothing
// to do.
func TestTimelineOfTheLostAck(t *testing.T) {
	for mode, wantRetry := range map[variant.Mode]string{variant.Broken: lab.KindDuplicate, variant.Fixed: lab.KindAbsorbed} {
		t.Run(string(mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			env := labEnv(t)
			env.Timeline = lab.NewTimeline()
			r, err := couponlab.LostAckDriver(ctx, env, mode)
			if err != nil {
				t.Fatal(err)
			}
			byKind, byActor := kinds(env.Timeline.Events())
			want := map[string]string{"first attempt": lab.KindEffect, "MySQL": lab.KindFault, "retry job": wantRetry}
			for actor, kind := range want {
				if byActor[actor] != kind {
					t.Errorf("%s: %q is %q, want %q (events %+v)", mode, actor, byActor[actor], kind, env.Timeline.Events())
				}
			}
			if got := byKind[lab.KindEffect] + byKind[lab.KindDuplicate]; got != r.Count {
				t.Errorf("%s: %d deductions on the timeline, %d in the ledger", mode, got, r.Count)
			}
		})
	}
}

// TestTimelineOfConcurrentRetries: every racing retry has its lane, and the
// deductions drawn are the ledger's rows: one effect, the rest duplicates.
func TestTimelineOfConcurrentRetries(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Broken, variant.Fixed} {
		t.Run(string(mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			env := labEnv(t)
			env.Timeline = lab.NewTimeline()
			r, err := couponlab.ConcurrentRetry(ctx, env, mode, couponlab.ConcurrentRetries)
			if err != nil {
				t.Fatal(err)
			}
			byKind, byActor := kinds(env.Timeline.Events())
			if len(byActor) != couponlab.ConcurrentRetries {
				t.Errorf("%d lanes, want one per retry (%d)", len(byActor), couponlab.ConcurrentRetries)
			}
			if byKind[lab.KindEffect] != 1 || byKind[lab.KindDuplicate] != r.Count-1 {
				t.Errorf("%d effect and %d duplicates drawn; the ledger holds %d rows", byKind[lab.KindEffect], byKind[lab.KindDuplicate], r.Count)
			}
		})
	}
}
