package lab

import (
	"testing"
	"time"
)

// TestProductScenarios runs incident 3 as `make lab` does: broken must show
// duplicate live products, orderly and both fixed modes none.
func TestProductScenarios(t *testing.T) {
	runScenarios(t, ProductScenarios(), 2*time.Minute)
}
