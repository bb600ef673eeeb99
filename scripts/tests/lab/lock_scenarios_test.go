package lab

import "testing"

// TestLockScenarios runs incident 7: each broken variant reproduces its
// hazard, each fixed one holds, with the exact counts the scenarios name.
func TestLockScenarios(t *testing.T) {
	for _, s := range LockScenarios() {
		t.Run(s.Variant, func(t *testing.T) {
			r, err := s.Run(t.Context(), labEnv(t))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Verdict(r) {
				t.Fatalf("%s: %s %d (%s), holds %v; want holds %v, count %d", s.Variant, r.Effect, r.Count, r.Expected, r.Holds, s.WantHolds, s.WantCount)
			}
		})
	}
}
