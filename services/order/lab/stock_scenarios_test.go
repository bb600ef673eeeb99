package lab

import (
	"testing"
	"time"
)

// TestStockScenarios runs incident 5 as `make lab` does: the broken
// read-modify-write must sell more than the 10 units in stock; the
// conditional decrement and the optimistic lock must sell exactly 10, with
// every other order refused with 409 and the stock at 0.
func TestStockScenarios(t *testing.T) {
	runScenarios(t, StockScenarios(), time.Minute)
}
