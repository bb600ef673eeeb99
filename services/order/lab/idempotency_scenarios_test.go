package lab

import (
	"testing"
	"time"
)

// TestIdempotencyScenarios runs incident 4 as `make lab` does: the broken
// check-then-act guard must let the double submit create more than one
// order, the Idempotency-Key middleware exactly one with identical answers.
func TestIdempotencyScenarios(t *testing.T) {
	runScenarios(t, IdempotencyScenarios(), time.Minute)
}
