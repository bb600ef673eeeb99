package lab_test

import (
	"context"
	"strings"
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
// 3 would be a different bug, not the incident.
var exactCounts = map[string]int{
	lab.Broken + "/driver": 2,
	lab.Broken + "/proxy":  2,
}

// TestScenarios runs every incident 1 scenario, the same ones `make lab`
// prints: each fixed variant deducts exactly once for one order, the broken
// lost-ACK variants exactly twice, and the other broken variants more than
// once.
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
				if r.Count != want || s.WantCount != want {
					t.Fatalf("%d deductions for one order (scenario wants %d), the incident is exactly %d", r.Count, s.WantCount, want)
				}
			} else if strings.HasPrefix(s.Variant, lab.Broken) {
				if r.Count <= 1 {
					t.Fatalf("broken variant did not reproduce the incident: %d deductions for one order", r.Count)
				}
			} else if r.Count != 1 {
				t.Fatalf("fixed variant: %d deductions for one order, want exactly 1", r.Count)
			}
			if !s.Verdict(r) {
				t.Fatalf("verdict: Holds=%v, WantHolds=%v, Count=%d, WantCount=%d", r.Holds, s.WantHolds, r.Count, s.WantCount)
			}
		})
	}
}
