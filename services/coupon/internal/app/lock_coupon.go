package app

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// LockCoupon locks couponID for the order r is placing and returns the lock:
// the discount the order applies and the lock's deadline. It is the order
// service's call before it commits an order (POST
// /internal/coupons/{id}/lock).
//
// The decision is taken on a plain read, and the conditional update
// UNUSED -> LOCKED is what makes it stick. Everything the decision looks at
// but the status never changes (the owner, the expiry, the template), so a
// decision that was right when read is still right if the coupon is still
// UNUSED when the update runs, and the update's WHERE clause checks exactly
// that. Two statements, no transaction:
//
//   - Orders racing for one coupon all read it UNUSED; their updates queue on
//     the row, the first changes it, and every other one changes nothing, reads
//     the coupon again, and is refused with coupon.ErrNotAvailable.
//   - A retry by the order that holds the lock (its first answer was lost)
//     reads it LOCKED by itself and gets the same lock back, deadline
//     included, never a second one: the lock is idempotent per order
//     number.
//   - The unique key on locked_order_no keeps an order to one coupon.
//
// A refusal is one of the errors coupon.RefusalReason names; nothing is
// written then.
func (a *App) LockCoupon(ctx context.Context, couponID uint64, r coupon.LockRequest) (coupon.Lock, error) {
	if err := r.Validate(); err != nil {
		return coupon.Lock{}, err
	}
	lock, outcome, err := a.lockCoupon(ctx, couponID, r)
	if err != nil {
		if reason, ok := coupon.RefusalReason(err); ok {
			a.metrics.lockRequests.WithLabelValues(reason).Inc()
		}
		return coupon.Lock{}, fmt.Errorf("lock coupon %d for order %s: %w", couponID, r.OrderNo, err)
	}
	a.metrics.lockRequests.WithLabelValues(outcome).Inc()
	if outcome == lockSameLock {
		a.log.InfoContext(ctx, "coupon already locked by this order, same lock returned", "coupon_id", couponID,
			"order_no", r.OrderNo, "locked_until", lock.LockedUntil)
	} else {
		a.log.InfoContext(ctx, "coupon locked", "coupon_id", couponID, "order_no", r.OrderNo,
			"discount_amount", lock.DiscountAmount, "locked_until", lock.LockedUntil)
	}
	return lock, nil
}

// lockAttempts bounds how often lockCoupon reads and updates again after its
// update found the coupon changed: only a coupon released between two reads
// makes it try once more.
const lockAttempts = 3

// lockCoupon decides on a read and locks with the conditional update. When
// the update changes nothing, the coupon left UNUSED after the read, and the
// decision is taken again on what it is now: locked by this same order (a
// concurrent copy of the request) is AlreadyDone, by anyone else a refusal.
func (a *App) lockCoupon(ctx context.Context, couponID uint64, r coupon.LockRequest) (coupon.Lock, string, error) {
	for range lockAttempts {
		now := a.now()
		c, err := a.store.Coupon(ctx, couponID)
		if err != nil {
			return coupon.Lock{}, "", err
		}
		t, err := a.Template(ctx, c.TemplateID)
		if err != nil {
			return coupon.Lock{}, "", err
		}
		decision, err := c.DecideLock(t, r, now)
		if err != nil {
			return coupon.Lock{}, "", err
		}
		if decision == coupon.AlreadyDone {
			return c.HeldLock(t), lockSameLock, nil
		}
		// The deadline is stored to the millisecond (DATETIME(3)); cut it
		// there before answering, so a retry that reads it back gets
		// exactly the deadline the first answer carried.
		until := now.Add(a.cfg.LockTTL).Truncate(time.Millisecond)
		n, err := a.store.LockCoupon(ctx, c.ID, r.OrderNo, until, now)
		if err != nil {
			return coupon.Lock{}, "", err
		}
		if n == 1 {
			return coupon.Lock{CouponID: c.ID, OrderNo: r.OrderNo, DiscountAmount: t.DiscountAmount, LockedUntil: until}, lockLocked, nil
		}
	}
	return coupon.Lock{}, "", fmt.Errorf("coupon %d for order %s: %w", couponID, r.OrderNo, coupon.ErrConcurrentChange)
}
