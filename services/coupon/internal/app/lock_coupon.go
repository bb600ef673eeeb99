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
// The read, the decision and the conditional update UNUSED -> LOCKED run in
// one transaction, on the coupon's row lock:
//
//   - Orders racing for one coupon queue on the row lock; the first locks,
//     and every other one then reads it LOCKED by another order and is
//     refused with coupon.ErrNotAvailable.
//   - A retry by the order that holds the lock (its first answer was lost)
//     reads it LOCKED by itself and gets the same lock back, deadline
//     included, never a second one: the lock is idempotent per order
//     number.
//   - The conditional update's rows affected are checked anyway, so a lock
//     can only be taken from UNUSED, and the unique key on locked_order_no
//     keeps an order to one coupon.
//
// A refusal is one of the errors coupon.RefusalReason names; nothing is
// written then.
func (a *App) LockCoupon(ctx context.Context, couponID uint64, r coupon.LockRequest) (coupon.Lock, error) {
	if err := r.Validate(); err != nil {
		return coupon.Lock{}, err
	}
	var lock coupon.Lock
	outcome := lockLocked
	err := a.store.InTx(ctx, func(tx coupon.Tx) error {
		now := a.now()
		c, err := tx.CouponForUpdate(ctx, couponID)
		if err != nil {
			return err
		}
		t, err := tx.Template(ctx, c.TemplateID)
		if err != nil {
			return err
		}
		decision, err := c.DecideLock(t, r, now)
		if err != nil {
			return err
		}
		if decision == coupon.AlreadyDone {
			outcome = lockSameLock
			lock = c.HeldLock(t)
			return nil
		}
		// The deadline is stored to the millisecond (DATETIME(3)); cut it
		// there before answering, so a retry that reads it back gets
		// exactly the deadline the first answer carried.
		until := now.Add(a.cfg.LockTTL).Truncate(time.Millisecond)
		n, err := tx.LockCoupon(ctx, c.ID, r.OrderNo, until, now)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("coupon %d for order %s: %w", c.ID, r.OrderNo, coupon.ErrConcurrentChange)
		}
		lock = coupon.Lock{CouponID: c.ID, OrderNo: r.OrderNo, DiscountAmount: t.DiscountAmount, LockedUntil: until}
		return nil
	})
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
