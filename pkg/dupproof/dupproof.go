// Package dupproof is the load-test proof that a check-then-act guard fails
// under concurrency and an atomic one holds: N goroutines released together
// race for one key against real Redis, and the number let through is counted.
//
// One source serves the test, the `go run ./scripts/cmd/dupproof` table and
// the lab runner.
package dupproof

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncemall/oncemall/pkg/ratelimit"
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

// Race releases n goroutines at once, each calling try once, and counts the
// calls that returned true.
func Race(n int, try func() (bool, error)) (int, error) {
	var passed atomic.Int32
	var firstErr error
	var errOnce sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := try()
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			if ok {
				passed.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(passed.Load()), firstErr
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

// Run measures the three guards on the two data sets of the seed: 100
// goroutines allowed 1, and 200 goroutines allowed 5. Keys are named under
// prefix and deleted afterwards.
func Run(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]Row, error) {
	var rows []Row
	for i, set := range []struct{ goroutines, allow int }{{100, 1}, {200, 5}} {
		limiter, err := ratelimit.New(rdb, ratelimit.Config{Prefix: prefix, Limit: set.allow, Window: time.Minute})
		if err != nil {
			return nil, err
		}
		guards := []struct {
			name string
			want int
			try  func(key string) (bool, error)
		}{
			{CheckThenSet, set.allow, func(k string) (bool, error) { return checkThenSet(ctx, rdb, k) }},
			{SetNX, 1, func(k string) (bool, error) { return setNX(ctx, rdb, k) }},
			{SlidingWindow, set.allow, func(k string) (bool, error) { return limiter.Allow(ctx, k) }},
		}
		for j, g := range guards {
			key := fmt.Sprintf("%sdupproof:%d:%d", prefix, i, j)
			passed, err := Race(set.goroutines, func() (bool, error) { return g.try(key) })
			rdb.Del(context.WithoutCancel(ctx), key, prefix+key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", g.name, err)
			}
			rows = append(rows, Row{
				Guard: g.name, Goroutines: set.goroutines, Allow: set.allow,
				Passed: passed, Want: g.want, Holds: passed == g.want,
			})
		}
	}
	return rows, nil
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
