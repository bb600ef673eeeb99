package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// BrokenLockKeeper is the coupon lock of incident 7 AS IT WAS: kept to
// reproduce the late lock in the lab and in the tests. Do not copy it.
// app.FixedLockKeeper, in services/coupon/internal/app/lock_coupon.go, is
// the fix. Walkthrough: docs/incidents/7-locks-outlive-orders.md.
//
// It breaks where marked BROKEN below: a lock never asks whether its
// attempt released, a release that finds no lock writes nothing, and a
// release frees the coupon whichever attempt of the order asks. When the
// order's lock call times out, the order gives up and releases a lock that
// has not landed yet; the delayed lock then lands and holds the coupon for
// an order that will never exist, until the lock TTL (45 minutes) and a
// sweep pass. When two copies of one request share the lock, the copy that
// fails frees the coupon under the copy that commits.
type BrokenLockKeeper struct{}

// brokenLockAttempts bounds the re-reads after an update found the coupon
// changed since it was read.
const brokenLockAttempts = 3

// Lock implements app.LockKeeper: the decision on a plain read, the
// conditional update UNUSED -> LOCKED to make it stick.
func (BrokenLockKeeper) Lock(ctx context.Context, env app.LockEnv, couponID uint64, r coupon.LockRequest, until time.Time) (coupon.Lock, bool, error) {
	for range brokenLockAttempts {
		c, err := env.Store.Coupon(ctx, couponID)
		if err != nil {
			return coupon.Lock{}, false, err
		}
		t, err := env.Template(ctx, c.TemplateID)
		if err != nil {
			return coupon.Lock{}, false, err
		}
		// BROKEN: nothing asks whether this order already released; a
		// lock that arrives after its release is taken like any other.
		decision, err := c.DecideLock(t, r, env.Now())
		if err != nil {
			return coupon.Lock{}, false, err
		}
		if decision == coupon.AlreadyDone {
			return c.HeldLock(t), true, nil
		}
		n, err := env.Store.LockCoupon(ctx, c.ID, r.OrderNo, until, env.Now())
		if err != nil {
			return coupon.Lock{}, false, err
		}
		if n == 1 {
			return coupon.Lock{CouponID: c.ID, OrderNo: r.OrderNo, DiscountAmount: t.DiscountAmount, LockedUntil: until}, false, nil
		}
	}
	return coupon.Lock{}, false, fmt.Errorf("coupon %d for order %s: %w", couponID, r.OrderNo, coupon.ErrConcurrentChange)
}

// Release implements app.LockKeeper: the conditional update LOCKED by
// orderNo -> UNUSED, alone.
func (BrokenLockKeeper) Release(ctx context.Context, env app.LockEnv, couponID uint64, orderNo, _ string) (app.ReleaseOutcome, error) {
	// BROKEN: a release that finds no lock (it has not landed yet) leaves
	// no trace, so the lock that lands after it is taken. And it frees the
	// coupon whichever attempt of the order asks: a concurrent copy of the
	// request that still holds the lock commits an order whose coupon is
	// UNUSED, free for another order to take.
	n, err := env.Store.ReleaseLock(ctx, couponID, orderNo, env.Now())
	if err != nil || n != 1 {
		return app.ReleaseNotHeld, err
	}
	return app.ReleaseFreed, nil
}
