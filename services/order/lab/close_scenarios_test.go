package lab

import (
	"testing"
	"time"
)

// TestCloseScenarios runs incident 6 as `make lab` does: with the broken
// close the late payment is kept on a cancelled order (no refund); with the
// fix the order ends cancelled with exactly one refund at the platform and
// its stock released once, or, when the platform answers the close with
// "paid", the order is paid and nothing is refunded.
func TestCloseScenarios(t *testing.T) {
	runScenarios(t, CloseScenarios(), time.Minute)
}
