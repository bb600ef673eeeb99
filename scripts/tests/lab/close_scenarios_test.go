package lab

import (
	"context"
	"testing"
	"time"
)

// TestCloseScenarios runs incident 6 as `make lab` does: with the broken
// close the late payment is kept on a cancelled order (no refund); with the
// fix the order ends cancelled with exactly one refund at the platform and
// its stock released once, or, when the platform answers the close with
// "paid", the order is paid and nothing is refunded.
func TestCloseScenarios(t *testing.T) {
	for _, s := range CloseScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
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
