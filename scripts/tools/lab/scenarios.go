package main

import (
	"fmt"
	"slices"

	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/scripts/tests/lab"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// all lists every incident's scenarios, in incident order (each package's
// own order kept within an incident).
func all() []pkglab.Scenario {
	var out []pkglab.Scenario
	out = append(out, couponlab.Scenarios()...)     // incident 1: lost commit ACK
	out = append(out, paymentlab.Scenarios()...)    // incident 2: payment callback retries
	out = append(out, orderlab.Scenarios()...)      // incident 3: batch product duplication; 4: double submit; 5: overselling
	out = append(out, lab.RedisGuardScenarios()...) // incident 4: the Redis entry guards
	out = append(out, lab.CloseScenarios()...)      // incident 6: paid after close
	out = append(out, lab.LockScenarios()...)       // incident 7: locks that outlive their order
	slices.SortStableFunc(out, func(a, b pkglab.Scenario) int { return a.Incident - b.Incident })
	return out
}

// selectScenarios keeps the scenarios of incident (0: all of them); an
// incident with none is an error, so a typo never passes as "nothing failed".
func selectScenarios(scenarios []pkglab.Scenario, incident int) ([]pkglab.Scenario, error) {
	var out []pkglab.Scenario
	for _, s := range scenarios {
		if incident == 0 || s.Incident == incident {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("lab: no scenario for incident %d", incident)
	}
	return out, nil
}
