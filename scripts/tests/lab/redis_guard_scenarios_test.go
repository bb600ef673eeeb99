package lab

import (
	"context"
	"testing"
	"time"
)

// TestRedisGuardScenarios runs the Redis entry guards as `make lab` does:
// check-then-set lets too many through, SET NX and the sliding window
// exactly what they allow.
func TestRedisGuardScenarios(t *testing.T) {
	for _, s := range RedisGuardScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Verdict(res) {
				t.Fatalf("variant %s: holds = %v (%s = %d), want holds %v", s.Variant, res.Holds, res.Effect, res.Count, s.WantHolds)
			}
		})
	}
}
