package lab_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testenv"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

func labEnv(t *testing.T) lab.Env {
	t.Helper()
	cfg := testenv.Config(t)
	return lab.Env{MySQL: cfg.MySQL, NATS: cfg.NATS, Redis: cfg.Redis, Log: testenv.Logger(t),
		Prefix: testenv.UniqueName(t, "lab"), Progress: t.Logf}
}

// exactCounts are the deterministic variants and the count each must show.
// The lost acknowledgement is one attempt that committed unheard plus one
// retry, so the reproduction is exactly 2 ledger rows for 1 order:
// 3 would be a different bug, not the incident. The sequential orders are
// the control of the orders race: the broken code without the race deducts
// the coupon once.
var exactCounts = map[string]int{
	lab.Broken + "/driver":            2,
	lab.Broken + "/proxy":             2,
	lab.Broken + "/sequential-orders": 1,
}

// TestScenarios runs every incident 1 scenario, the same ones `make lab`
// prints: the broken lost-ACK variants deduct exactly twice for one order,
// the other broken variants more than once (for the orders race: more than
// one order deducts the one coupon), the sequential control and every fixed
// variant exactly once. The orders scenarios also fail unless every order
// that did not deduct has its message FAILED as used by another order.
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
			if want, ok := exactCounts[s.Variant]; ok {
				if r.Count != want {
					t.Fatalf("%d %s, want exactly %d", r.Count, r.Effect, want)
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
// require exactly their count (not any count above 1), and the orders race
// comes with its control.
func TestScenarioList(t *testing.T) {
	byVariant := map[string]lab.Scenario{}
	for _, s := range couponlab.Scenarios() {
		byVariant[s.Variant] = s
	}
	for _, v := range []string{lab.Broken + "/driver", lab.Broken + "/proxy"} {
		if s := byVariant[v]; s.WantHolds || s.WantCount != 2 {
			t.Errorf("%s: WantHolds %v, WantCount %d; want a reproduction of exactly 2", v, s.WantHolds, s.WantCount)
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
