package app_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// abandon leaves couponID as a retry that failed within the lease of the
// try that crashed before it leaves it: attempt "dead" of orderNo locked it
// and died, attempt "retry" re-entered the lock, failed and released, and
// the release left the lock to "dead", whose hold has not lapsed yet.
func (f *fixture) abandon(t testing.TB, couponID uint64, orderNo string) {
	t.Helper()
	for _, attempt := range []string{"dead", "retry"} {
		if _, err := f.app.LockCoupon(ctx, couponID, coupon.LockRequest{OrderNo: orderNo, UserID: 7, OrderAmount: orderAmount, Attempt: attempt}); err != nil {
			t.Fatalf("lock of attempt %s: %v", attempt, err)
		}
	}
	if released, err := f.app.ReleaseLock(ctx, couponID, orderNo, "retry"); err != nil || released {
		t.Fatalf("the retry's release: %v, %v; want the lock left to the dead try", released, err)
	}
}

// pastTheLease is a clock after every hold taken now has lapsed (the default
// lease is a minute) and before the lock's deadline (45 minutes).
func pastTheLease() time.Time { return time.Now().UTC().Add(2 * time.Minute) }

// TestSweeperFreesALockThatEveryAttemptOfItsOrderLeft: a try locks the
// coupon and crashes before its order commits; the customer's retry
// re-enters the lock, fails (out of stock) and releases, and the release
// leaves the lock to the crashed try, whose hold still runs. Once that hold
// lapses, the next sweep asks the order service and frees the coupon, long
// before the lock's deadline; if the crashed try had committed its order
// before dying, the lock is kept.
func TestSweeperFreesALockThatEveryAttemptOfItsOrderLeft(t *testing.T) {
	for _, committed := range []bool{false, true} {
		t.Run(fmt.Sprintf("order committed %v", committed), func(t *testing.T) {
			f := newLockFixture(t, variant.Fixed)
			c := f.issue(t, 7)
			f.abandon(t, c.ID, "O-ABANDONED")
			if committed {
				f.orders.set("O-ABANDONED", "WAIT_PAY")
			}

			r, err := f.app.SweepLocks(ctx)
			if err != nil || r.Abandoned != 0 || f.orders.asked.Load() != 0 {
				t.Fatalf("within the dead try's lease: %+v, %v, order service asked %d times; want nothing looked at", r, err, f.orders.asked.Load())
			}

			f.setClock(pastTheLease)
			r, err = f.app.SweepLocks(ctx)
			testenv.Must(t, err)
			got := f.lockRow(t, c.ID)
			switch {
			case !committed && (r.Abandoned != 1 || r.Released != 1 || got.Status != coupon.StatusUnused):
				t.Fatalf("after the lease: %+v, coupon %s; want it looked at and freed", r, got.Status)
			case committed && (r.Abandoned != 1 || r.Kept != 1 || got.Status != coupon.StatusLocked || got.LockedOrderNo != "O-ABANDONED"):
				t.Fatalf("after the lease: %+v, coupon %s by %q; want the committed order's lock kept", r, got.Status, got.LockedOrderNo)
			}
			if !committed {
				if l := f.lock(t, c.ID, "O-NEXT", 7); l.OrderNo != "O-NEXT" {
					t.Fatalf("the customer's next order could not use the coupon: %+v", l)
				}
			}
		})
	}
}

// TestSweepersNeverFreeALockAnAttemptHoldsAgain races, on 200 abandoned
// locks, 8 sweepers against 200 new attempts of the locks' orders (the
// customers retrying once more): each attempt re-enters its order's lock,
// then commits the order (the order service answers WAIT_PAY from then on).
// A sweeper that asked while the order did not exist yet must still leave
// the lock to the attempt that holds it: every coupon ends LOCKED by its
// order. Without the hold check in the sweeper's transaction, the attempts'
// orders commit on coupons the sweepers freed. 100 more abandoned locks,
// whose orders nobody retries, end UNUSED.
func TestSweepersNeverFreeALockAnAttemptHoldsAgain(t *testing.T) {
	const retried, forgotten, sweepers = 200, 100, 8
	f := newLockFixture(t, variant.Fixed)
	coupons := make([]coupon.Coupon, retried+forgotten)
	for i := range coupons {
		coupons[i] = f.issue(t, 7)
		f.abandon(t, coupons[i].ID, fmt.Sprintf("O-RACE-%03d", i))
	}
	f.setClock(pastTheLease)

	var wg sync.WaitGroup
	var retriesDone atomic.Bool
	start := make(chan struct{})
	for range sweepers {
		wg.Go(func() {
			<-start
			for !retriesDone.Load() {
				if _, err := f.app.SweepLocks(ctx); err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
			}
		})
	}
	var retries sync.WaitGroup
	for i := range retried {
		retries.Go(func() {
			<-start
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			no := fmt.Sprintf("O-RACE-%03d", i)
			if _, err := f.app.LockCoupon(ctx, coupons[i].ID, coupon.LockRequest{OrderNo: no, UserID: 7, OrderAmount: orderAmount, Attempt: "again"}); err != nil {
				t.Errorf("the new attempt of %s: %v", no, err)
				return
			}
			time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
			f.orders.set(no, "WAIT_PAY")
		})
	}
	close(start)
	retries.Wait()
	retriesDone.Store(true)
	wg.Wait()
	if _, err := f.app.SweepLocks(ctx); err != nil {
		t.Fatal(err)
	}

	var freedUnderOrder, stuck []string
	for i, c := range coupons {
		no := fmt.Sprintf("O-RACE-%03d", i)
		got := f.lockRow(t, c.ID)
		switch {
		case i < retried && (got.Status != coupon.StatusLocked || got.LockedOrderNo != no):
			freedUnderOrder = append(freedUnderOrder, fmt.Sprintf("%s: %s by %q", no, got.Status, got.LockedOrderNo))
		case i >= retried && got.Status != coupon.StatusUnused:
			stuck = append(stuck, no)
		}
	}
	if len(freedUnderOrder) > 0 {
		t.Errorf("%d of %d committed orders lost their coupon's lock to a sweeper, e.g. %v", len(freedUnderOrder), retried, freedUnderOrder[0])
	}
	if len(stuck) > 0 {
		t.Errorf("%d of %d locks nobody holds stayed LOCKED, e.g. %v", len(stuck), forgotten, stuck[0])
	}
	t.Logf("%d sweeps asked the order service %d times", sweepers, f.orders.asked.Load())
}
