package lab

import (
	"context"
	"testing"
	"time"
)

// TestProductScenarios runs incident 3 as `make lab` does: broken must show
// duplicate live products, orderly and both fixed modes none.
func TestProductScenarios(t *testing.T) {
	for _, s := range ProductScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s = %d (want %s, holds %v)", res.Variant, res.Effect, res.Count, res.Expected, res.Holds)
			if !s.Verdict(res) {
				t.Fatalf("variant %s: holds = %v, want %v (%d duplicate live products)", s.Variant, res.Holds, s.WantHolds, res.Count)
			}
		})
	}
}
