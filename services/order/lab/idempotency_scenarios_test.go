package lab

import (
	"context"
	"testing"
	"time"
)

// TestIdempotencyScenarios runs incident 4 as `make lab` does: the broken
// check-then-act guard must let the double submit create more than one
// order, the Idempotency-Key middleware exactly one with identical answers;
// of the Redis guards, check-then-set lets too many through, SET NX and the
// sliding window exactly what they allow.
func TestIdempotencyScenarios(t *testing.T) {
	for _, s := range IdempotencyScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s = %d (want %s, holds %v)", res.Variant, res.Effect, res.Count, res.Expected, res.Holds)
			if !s.Verdict(res) {
				t.Fatalf("variant %s: holds = %v, want %v", s.Variant, res.Holds, s.WantHolds)
			}
		})
	}
}
