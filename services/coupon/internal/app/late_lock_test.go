package app_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

// newLockFixture builds the app with incident 7's lock keeper of mode.
func newLockFixture(t *testing.T, mode variant.Mode) *fixture {
	t.Helper()
	var o assembly.Options
	if mode == variant.Broken {
		o.Locks = couponlab.BrokenLockKeeper{}
	}
	return newFixtureWith(t, testDB(t), coupontest.Settings(t, nil), o)
}

// countLocked counts the coupons the database holds LOCKED.
func (f *fixture) countLocked(t testing.TB) int64 {
	t.Helper()
	var n int64
	testenv.Must(t, f.store.DB().Table("coupons").Where("status = ?", string(coupon.StatusLocked)).Count(&n).Error)
	return n
}

// TestALockThatArrivesAfterItsReleaseNeverHoldsTheCoupon is incident 7's
// late lock: the order's lock call timed out, the order released, and the
// delayed lock lands after the release. The broken keeper takes it and the
// coupon stays LOCKED for an order that does not exist; the fixed one
// refuses it, and the next attempt of the same order number still locks.
func TestALockThatArrivesAfterItsReleaseNeverHoldsTheCoupon(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Broken, variant.Fixed} {
		t.Run(string(mode), func(t *testing.T) {
			f := newLockFixture(t, mode)
			c := f.issue(t, 7)
			req := coupon.LockRequest{OrderNo: "O-LATE", UserID: 7, OrderAmount: orderAmount, Attempt: "a1"}
			released, err := f.app.ReleaseLock(ctx, c.ID, req.OrderNo, req.Attempt)
			if err != nil || released {
				t.Fatalf("release before the lock landed: %v, %v; want false, nil", released, err)
			}
			_, err = f.app.LockCoupon(ctx, c.ID, req)
			got := f.lockRow(t, c.ID)
			if mode == variant.Broken {
				if err != nil || got.Status != coupon.StatusLocked || got.LockedOrderNo != "O-LATE" {
					t.Fatalf("broken: late lock %v, coupon %s by %q; want it LOCKED by the order that gave up", err, got.Status, got.LockedOrderNo)
				}
				return
			}
			if reason, _ := coupon.RefusalReason(err); reason != "released" || got.Status != coupon.StatusUnused {
				t.Fatalf("fixed: late lock %v (reason %q), coupon %s; want refused as released, UNUSED", err, reason, got.Status)
			}
			if v := f.metric(t, "coupon_lock_requests_total", "released"); v != 1 {
				t.Fatalf("coupon_lock_requests_total{outcome=released} = %v, want 1", v)
			}
			retry := req
			retry.Attempt = "a2"
			if l, err := f.app.LockCoupon(ctx, c.ID, retry); err != nil || l.OrderNo != "O-LATE" {
				t.Fatalf("the next attempt of the order: %+v, %v; want the lock", l, err)
			}
		})
	}
}

// TestLateLocksRacingTheirReleasesHoldNoCoupon races, on each of 150
// coupons, the lock of an attempt against its release (300 goroutines):
// whichever runs first, no coupon is left LOCKED, and every release is on
// record.
func TestLateLocksRacingTheirReleasesHoldNoCoupon(t *testing.T) {
	f := newLockFixture(t, variant.Fixed)
	const n = 150
	coupons := make([]coupon.Coupon, n)
	for i := range coupons {
		coupons[i] = f.issue(t, 7)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range coupons {
		order := fmt.Sprintf("O-%03d", i)
		wg.Go(func() {
			<-start
			_, err := f.app.LockCoupon(ctx, c.ID, coupon.LockRequest{OrderNo: order, UserID: 7, OrderAmount: orderAmount, Attempt: "a1"})
			if err != nil && !errors.Is(err, coupon.ErrReleased) {
				t.Errorf("lock %d: %v", c.ID, err)
			}
		})
		wg.Go(func() {
			<-start
			if _, err := f.app.ReleaseLock(ctx, c.ID, order, "a1"); err != nil {
				t.Errorf("release %d: %v", c.ID, err)
			}
		})
	}
	close(start)
	wg.Wait()
	var records int64
	testenv.Must(t, f.store.DB().Table("coupon_lock_release").Count(&records).Error)
	if locked := f.countLocked(t); locked != 0 || records != n {
		t.Fatalf("%d coupons LOCKED, %d release records; want 0 and %d", locked, records, n)
	}
}

// TestReleaseRecordsAreForgottenAfterTheLockTTLInBatches: the sweep job's
// second step deletes the records and the holds past their expiry, in
// batches, and keeps the others.
func TestReleaseRecordsAreForgottenAfterTheLockTTLInBatches(t *testing.T) {
	f := newFixtureWith(t, testDB(t), coupontest.Settings(t, map[string]string{"COUPON_SWEEP_BATCH": "7"}), assembly.Options{})
	c := f.issue(t, 7)
	now := time.Now().UTC()
	f.setClock(func() time.Time { return now })
	held := f.issue(t, 7)
	for i := range 20 {
		if _, err := f.app.ReleaseLock(ctx, c.ID, fmt.Sprintf("OLD-%d", i), "a1"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.app.LockCoupon(ctx, held.ID, coupon.LockRequest{OrderNo: "HELD", UserID: 7, OrderAmount: orderAmount, Attempt: fmt.Sprint("a", i)}); err != nil {
			t.Fatal(err)
		}
	}
	f.setClock(func() time.Time { return now.Add(f.cfg.LockTTL / 2) })
	if _, err := f.app.ReleaseLock(ctx, c.ID, "NEW", "a1"); err != nil {
		t.Fatal(err)
	}
	f.setClock(func() time.Time { return now.Add(f.cfg.LockTTL + time.Second) })
	n, err := f.app.ForgetReleases(ctx)
	var left []string
	testenv.Must(t, f.store.DB().Table("coupon_lock_release").Pluck("order_no", &left).Error)
	if err != nil || n != 40 || len(left) != 1 || left[0] != "NEW" || f.count(t, "coupon_lock_hold", "1 = 1") != 0 {
		t.Fatalf("forgot %d (%v), left %v and %d holds; want 20 records and 20 holds forgotten, NEW kept", n, err, left,
			f.count(t, "coupon_lock_hold", "1 = 1"))
	}
}
