package lab

// Incident 4's extra variants: the Redis entry guards (check-then-set, SET
// NX, sliding window), each raced on its own key (pkg/lab/dupproof). They
// need no service; they sit beside the order service's double submit in
// the lab's table.

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/lab/dupproof"
	"github.com/oncemall/oncemall/pkg/redisclient"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
)

// The Redis entry guards' variants.
const (
	VariantCheckThenSet  = "broken-check-then-set"
	VariantSetNX         = "fixed-set-nx"
	VariantSlidingWindow = "fixed-sliding-window"
)

// RedisGuardScenarios lists the Redis entry guards of incident 4.
func RedisGuardScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 4, Variant: VariantCheckThenSet, WantHolds: false, Run: redisGuardScenario(VariantCheckThenSet, dupproof.CheckThenSet, 100, 1)},
		{Incident: 4, Variant: VariantSetNX, WantHolds: true, Run: redisGuardScenario(VariantSetNX, dupproof.SetNX, 100, 1)},
		{Incident: 4, Variant: VariantSlidingWindow, WantHolds: true, Run: redisGuardScenario(VariantSlidingWindow, dupproof.SlidingWindow, 200, 5)},
	}
}

// redisGuardScenario races n goroutines for one Redis key through one of
// the Redis entry guards, wanting allow of them through.
func redisGuardScenario(variant, guard string, n, allow int) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 4,
			Title:    orderlab.Incident4Title,
			Variant:  variant,
			Injected: fmt.Sprintf("%d goroutines race for one Redis key, allow %d", n, allow),
			Effect:   "passed the guard: " + guard,
		}
		rdb := redisclient.New(env.Redis)
		defer rdb.Close()
		var observe func(dupproof.Attempt)
		if env.Timeline != nil {
			var seen atomic.Int32
			observe = func(a dupproof.Attempt) {
				kind, label := lab.KindRefused, "blocked"
				switch {
				case a.Err != nil:
					kind, label = lab.KindError, a.Err.Error()
				case a.Passed:
					kind, label = lab.KindEffect, "passed the guard"
				}
				env.Timeline.Add(lab.Event{Actor: fmt.Sprintf("goroutine %03d", seen.Add(1)), Kind: kind, Label: label, Start: a.Start, End: a.End})
			}
		}
		row, err := dupproof.RunGuardObserved(ctx, rdb, env.Name(variant)+":", guard, n, allow, observe)
		if err != nil {
			return res, err
		}
		env.Timeline.MarkDuplicates(row.Want)
		res.Count, res.Holds = row.Passed, row.Holds
		res.Expected = fmt.Sprintf("= %d", row.Want)
		return res, nil
	}
}
