package lab

import (
	"context"
	"testing"
	"time"
)

// TestStockScenarios runs incident 5 as `make lab` does: the broken
// read-modify-write must sell more than the 10 units in stock; the
// conditional decrement and the optimistic lock must sell exactly 10, with
// every other order refused with 409 and the stock at 0.
func TestStockScenarios(t *testing.T) {
	for _, s := range StockScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := s.Run(ctx, labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s = %d (want %s, holds %v)", res.Variant, res.Effect, res.Count, res.Expected, res.Holds)
			if !s.Verdict(res) {
				t.Fatalf("variant %s: holds = %v (count %d), want holds %v (count %d)", s.Variant, res.Holds, res.Count, s.WantHolds, s.WantCount)
			}
		})
	}
}
