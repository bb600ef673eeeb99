package redislock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/race"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestAcquireRaceHasOneWinner(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	locks := redislock.New(rdb, prefix)
	ctx := context.Background()

	// Every call either wins or is refused with ErrNotAcquired; any other
	// error fails the race.
	const n = 100
	won, err := race.Run(n, func() (bool, error) {
		_, err := locks.Acquire(ctx, "job", 10*time.Second)
		if errors.Is(err, redislock.ErrNotAcquired) {
			return false, nil
		}
		return err == nil, err
	})
	testenv.Must(t, err)
	if won != 1 {
		t.Fatalf("won=%d refused=%d, want 1 and %d", won, n-won, n-1)
	}
}

func TestExpiredHolderCannotReleaseOrRefreshTheNextHoldersLock(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	locks := redislock.New(rdb, prefix)
	ctx := context.Background()

	first, err := locks.Acquire(ctx, "job", 50*time.Millisecond)
	testenv.Must(t, err)
	time.Sleep(120 * time.Millisecond)
	second, err := locks.Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("lock did not expire: %v", err)
	}
	if err := first.Release(ctx); !errors.Is(err, redislock.ErrLost) {
		t.Fatalf("stale release: got %v, want ErrLost", err)
	}
	if err := first.Refresh(ctx, time.Minute); !errors.Is(err, redislock.ErrLost) {
		t.Fatalf("stale refresh: got %v, want ErrLost", err)
	}
	if _, err := locks.Acquire(ctx, "job", time.Second); !errors.Is(err, redislock.ErrNotAcquired) {
		t.Fatalf("the second holder's lock was disturbed: %v", err)
	}
	testenv.Must(t, second.Release(ctx))
	if _, err := locks.Acquire(ctx, "job", time.Second); err != nil {
		t.Fatalf("released lock not free: %v", err)
	}
}

// TestRunRenewsAndRunsOnceAcrossReplicas races 20 "replicas" whose job
// outlives the lock ttl several times over: renewal must keep every other
// replica out, so the job runs exactly once.
func TestRunRenewsAndRunsOnceAcrossReplicas(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()

	const replicas = 20
	var ran, skipped atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			locks := redislock.New(rdb, prefix)
			<-start
			// Each replica keeps trying for the whole job duration, so a lock
			// that lapsed without renewal would let a second one in.
			deadline := time.Now().Add(700 * time.Millisecond)
			for time.Now().Before(deadline) {
				err := locks.Run(ctx, "archive", 150*time.Millisecond, func(ctx context.Context) error {
					ran.Add(1)
					select {
					case <-time.After(time.Second):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				if errors.Is(err, redislock.ErrNotAcquired) {
					skipped.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
				}
				return
			}
		}()
	}
	close(start)
	wg.Wait()
	if ran.Load() != 1 {
		t.Fatalf("job ran %d times, want 1 (skipped %d attempts)", ran.Load(), skipped.Load())
	}
}

func TestRunCancelsTheJobWhenTheLockIsLost(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	locks := redislock.New(rdb, prefix)
	ctx := context.Background()

	err := locks.Run(ctx, "job", 90*time.Millisecond, func(ctx context.Context) error {
		// Someone (an operator, a failover) removes the key under us.
		testenv.Must(t, rdb.Del(ctx, prefix+"job").Err())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("job was not cancelled")
		}
	})
	if !errors.Is(err, redislock.ErrLost) {
		t.Fatalf("got %v, want ErrLost", err)
	}
}
