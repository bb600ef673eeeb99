package lab_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// labEnv is a lab environment over the test dependencies, named for t.
func labEnv(t *testing.T) lab.Env {
	t.Helper()
	cfg := testenv.Config(t)
	testenv.NATS(t) // fails at once, with the start command, when NATS is down
	testenv.NewDatabase(t)
	return lab.Env{MySQL: cfg.MySQL, NATS: cfg.NATS, Redis: cfg.Redis, Log: testenv.Logger(t), Prefix: testenv.UniqueName(t, "lab")}
}

// TestScenarios runs incident 2's scenarios as `make lab` does: the broken
// handler must record the storm's payment more than once, the fixed handler
// exactly once with one outbox row and one stream message.
func TestScenarios(t *testing.T) {
	for _, sc := range paymentlab.Scenarios() {
		t.Run(sc.Variant, func(t *testing.T) {
			env := labEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			start := time.Now()
			res, err := sc.Run(ctx, env)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Logf("%s: %s = %d (%s), holds=%v in %s", res.Variant, res.Effect, res.Count, res.Expected, res.Holds, time.Since(start).Round(time.Millisecond))
			if !sc.Verdict(res) {
				t.Fatalf("%s variant: holds=%v, want %v: %s = %d", sc.Variant, res.Holds, sc.WantHolds, res.Effect, res.Count)
			}
			switch sc.Variant {
			case lab.Broken:
				if res.Count < 2 {
					t.Fatalf("broken handler recorded %d payment records; the storm must reproduce duplicates", res.Count)
				}
			case lab.Fixed:
				if res.Count != 1 || !strings.Contains(res.Effect, "events 1;") || !strings.Contains(res.Effect, "stream msgs 3 for 3 payments") {
					t.Fatalf("fixed handler: %s = %d, want exactly one of each", res.Effect, res.Count)
				}
			}
		})
	}
}
