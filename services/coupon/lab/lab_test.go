package lab_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

func labEnv(t *testing.T) lab.Env {
	t.Helper()
	cfg := testenv.Config(t)
	return lab.Env{MySQL: cfg.MySQL, NATS: cfg.NATS, Redis: cfg.Redis, Log: testenv.Logger(t),
		Prefix: testenv.UniqueName(t, "lab"), Progress: t.Logf}
}

// TestScenarios runs every incident 1 scenario, the same ones `make lab`
// prints: a variant with a WantCount (the broken lost-ACK ones) shows exactly
// that count, the other broken variants more than one deduction (for the
// orders race: more than one order deducts the one coupon), the sequential
// control and every fixed variant exactly one. The orders scenarios also fail
// unless every order that did not deduct has its message FAILED as used by
// another order.
func TestScenarios(t *testing.T) {
	for _, s := range couponlab.Scenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("%s: %s → %d %s (want %s)", r.Variant, r.Injected, r.Count, r.Effect, r.Expected)
			if s.WantCount != 0 {
				if r.Count != s.WantCount {
					t.Fatalf("%d %s, want exactly %d", r.Count, r.Effect, s.WantCount)
				}
			} else if !s.WantHolds {
				if r.Count <= 1 {
					t.Fatalf("broken variant did not reproduce the incident: %d %s", r.Count, r.Effect)
				}
			} else if r.Count != 1 {
				t.Fatalf("fixed variant: %d %s, want exactly 1", r.Count, r.Effect)
			}
			if !s.Verdict(r) {
				t.Fatalf("verdict: Holds=%v, WantHolds=%v, Count=%d, WantCount=%d", r.Holds, s.WantHolds, r.Count, s.WantCount)
			}
		})
	}
}

// TestScenarioList pins what the table promises: the lost-ACK reproductions
// require exactly LostAckBrokenCount (one commit unheard plus one retry; any
// other count is a different bug), and the orders race comes with its control.
func TestScenarioList(t *testing.T) {
	byVariant := map[string]lab.Scenario{}
	for _, s := range couponlab.Scenarios() {
		byVariant[s.Variant] = s
	}
	for _, v := range []string{lab.Broken + "/driver", lab.Broken + "/proxy"} {
		if s := byVariant[v]; s.WantHolds || s.WantCount != couponlab.LostAckBrokenCount {
			t.Errorf("%s: WantHolds %v, WantCount %d; want a reproduction of exactly %d", v, s.WantHolds, s.WantCount, couponlab.LostAckBrokenCount)
		}
	}
	for v, holds := range map[string]bool{
		lab.Broken + "/concurrent-orders": false,
		lab.Broken + "/sequential-orders": true,
		lab.Fixed + "/concurrent-orders":  true,
	} {
		if s, ok := byVariant[v]; !ok || s.WantHolds != holds {
			t.Errorf("%s: listed %v, WantHolds %v; want listed with WantHolds %v", v, ok, s.WantHolds, holds)
		}
	}
}
