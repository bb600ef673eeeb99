package lab

import (
	"context"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// labEnv returns a lab environment on the test's dependencies, its names
// unique to the test.
func labEnv(t testing.TB) lab.Env {
	t.Helper()
	cfg := testenv.Config(t)
	return lab.Env{MySQL: cfg.MySQL, NATS: cfg.NATS, Redis: cfg.Redis, Log: testenv.Logger(t), Prefix: testenv.UniqueName(t, "lab")}
}

// runScenarios runs each scenario as `make lab` does, as a subtest of its
// variant with its own environment and timeout, and fails one whose
// verdict is wrong: a broken variant that does not reproduce, a fixed one
// that does not hold.
func runScenarios(t *testing.T, scenarios []lab.Scenario, timeout time.Duration) {
	for _, s := range scenarios {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			res, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s = %d (want %s, holds %v)", res.Variant, res.Effect, res.Count, res.Expected, res.Holds)
			if !s.Verdict(res) {
				t.Fatalf("variant %s: holds = %v (%s = %d), want holds %v (count %d)", s.Variant, res.Holds, res.Effect, res.Count, s.WantHolds, s.WantCount)
			}
		})
	}
}
