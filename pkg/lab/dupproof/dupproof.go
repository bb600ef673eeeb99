// Package dupproof is the load-test proof that a check-then-act guard fails
// under concurrency and an atomic one holds: N goroutines released together
// race for one key against real Redis, and the number let through is counted.
//
// One source serves the test, the `go run ./scripts/tools/dupproof` table and
// the lab runner.
package dupproof

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/ratelimit"
	"github.com/oncemall/oncemall/pkg/testkit/race"
)

// Guard names.
const (
	CheckThenSet  = "check-then-set (EXISTS, then SET)"
	SetNX         = "SET NX EX (atomic placeholder)"
	SlidingWindow = "sliding window (Lua over a ZSET)"
)

// Gap is the pause check-then-set leaves between its check and its write.
// In a real handler that gap is a database query or a remote call, so it is
// only ever longer.
const Gap = 5 * time.Millisecond

// Row is one measured race.
type Row struct {
	Guard      string
	Goroutines int
	Allow      int // what the caller wanted to let through
	Passed     int // how many got through
	// Want is what a correct guard of this kind lets through. SET NX is a
	// placeholder, not a counter: it lets exactly 1 through whatever Allow is.
	Want  int
	Holds bool
}

// checkThenSet is the broken guard: EXISTS and SET are two commands, and
// every goroutine that runs EXISTS before the first SET lands sees the key
// absent and goes through.
func checkThenSet(ctx context.Context, rdb redis.Cmdable, key string) (bool, error) {
	n, err := rdb.Exists(ctx, key).Result()
	if err != nil || n > 0 {
		return false, err
	}
	time.Sleep(Gap)
	return true, rdb.Set(ctx, key, "1", time.Minute).Err()
}

// setNX is the atomic placeholder: one command checks and writes.
func setNX(ctx context.Context, rdb redis.Cmdable, key string) (bool, error) {
	return rdb.SetNX(ctx, key, "1", time.Minute).Result()
}

// Run measures the three guards on the two data sets of the incident's load test: 100
// goroutines allowed 1, and 200 goroutines allowed 5. Keys are named under
// prefix and deleted afterwards.
func Run(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]Row, error) {
	var rows []Row
	for i, set := range []struct{ goroutines, allow int }{{100, 1}, {200, 5}} {
		for j, guard := range []string{CheckThenSet, SetNX, SlidingWindow} {
			row, err := RunGuard(ctx, rdb, fmt.Sprintf("%s%d:%d:", prefix, i, j), guard, set.goroutines, set.allow)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// RunGuard measures one guard (CheckThenSet, SetNX or SlidingWindow): n
// goroutines race for one key named under prefix, wanting allow of them let
// through. The key is deleted afterwards. The lab runs each guard as a row
// of incident 4 with it.
func RunGuard(ctx context.Context, rdb redis.UniversalClient, prefix, guard string, n, allow int) (Row, error) {
	return RunGuardObserved(ctx, rdb, prefix, guard, n, allow, nil)
}

// Attempt is one goroutine's try at the guard: whether it passed, and when
// it started and got its answer.
type Attempt struct {
	Passed     bool
	Err        error
	Start, End time.Time
}

// RunGuardObserved is RunGuard that also hands every goroutine's attempt to
// observe (when not nil; called concurrently), for the lab report's
// timeline.
func RunGuardObserved(ctx context.Context, rdb redis.UniversalClient, prefix, guard string, n, allow int, observe func(Attempt)) (Row, error) {
	key := prefix + "dupproof"
	want := allow
	var try func() (bool, error)
	switch guard {
	case CheckThenSet:
		try = func() (bool, error) { return checkThenSet(ctx, rdb, key) }
	case SetNX:
		want = 1
		try = func() (bool, error) { return setNX(ctx, rdb, key) }
	case SlidingWindow:
		limiter, err := ratelimit.New(rdb, ratelimit.Config{Prefix: prefix, Limit: allow, Window: time.Minute})
		if err != nil {
			return Row{}, err
		}
		try = func() (bool, error) { return limiter.Allow(ctx, key) }
	default:
		return Row{}, fmt.Errorf("dupproof: unknown guard %q", guard)
	}
	if observe != nil {
		plain := try
		try = func() (bool, error) {
			start := time.Now()
			ok, err := plain()
			observe(Attempt{Passed: ok, Err: err, Start: start, End: time.Now()})
			return ok, err
		}
	}
	passed, err := race.Run(n, try)
	rdb.Del(context.WithoutCancel(ctx), key, prefix+key)
	if err != nil {
		return Row{}, fmt.Errorf("%s: %w", guard, err)
	}
	return Row{Guard: guard, Goroutines: n, Allow: allow, Passed: passed, Want: want, Holds: passed == want}, nil
}

// Print writes rows as an aligned table.
func Print(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "guard\tgoroutines\tallow\tpassed\twant\tverdict")
	for _, r := range rows {
		verdict := "holds"
		if !r.Holds {
			verdict = "BROKEN"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Guard, r.Goroutines, r.Allow, r.Passed, r.Want, verdict)
	}
	return tw.Flush()
}
