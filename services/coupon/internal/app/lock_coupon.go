package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// LockKeeper is incident 7's choice on the coupon side: how a lock is taken
// and how an order's attempt gives it back. The service's is FixedLockKeeper
// (here); the incident's, side by side with it, is services/coupon/lab's
// lock_broken.go, plugged in only in lab mode.
type LockKeeper interface {
	// Lock takes couponID's lock for r until until, or returns the lock r's
	// order already holds (sameLock true); a refusal is an error
	// coupon.RefusalReason names.
	Lock(ctx context.Context, env LockEnv, couponID uint64, r coupon.LockRequest, until time.Time) (l coupon.Lock, sameLock bool, err error)
	// Release gives back the lock attempt of orderNo holds on couponID and
	// reports what became of the coupon.
	Release(ctx context.Context, env LockEnv, couponID uint64, orderNo, attempt string) (ReleaseOutcome, error)
}

// LockEnv is what a LockKeeper works with.
type LockEnv struct {
	Store    coupon.Store
	Now      func() time.Time
	Template func(ctx context.Context, id uint64) (coupon.Template, error)
	// LockTTL is how long a lock lasts, and so how long a release is
	// remembered.
	LockTTL time.Duration
	// HoldLease is how long an attempt's hold on its order's lock lasts.
	HoldLease time.Duration
}

// ReleaseOutcome is what a release call did to the coupon.
type ReleaseOutcome string

// The outcomes of LockKeeper.Release.
const (
	// ReleaseFreed: the coupon is UNUSED again.
	ReleaseFreed ReleaseOutcome = "freed"
	// ReleaseLeftToSibling: the coupon stays LOCKED by the order, because
	// another attempt of it (a concurrent copy of the request) holds it.
	ReleaseLeftToSibling ReleaseOutcome = "left_to_sibling"
	// ReleaseNotHeld: the coupon was not LOCKED by the order (the lock had
	// not landed, was released already, or the coupon is used or another
	// order's), or is unknown.
	ReleaseNotHeld ReleaseOutcome = "not_held"
)

// LockCoupon locks couponID for the order r is placing and returns the lock:
// the discount the order applies and the lock's deadline. It is the order
// service's call before it commits an order (POST
// /internal/coupons/{id}/lock). The lock is idempotent per order number: a
// retry by the order that holds it (its first answer was lost, or its
// service died before the order committed) gets the same lock back,
// deadline included, never a second one. A refusal is one of the errors
// coupon.RefusalReason names; nothing is written then.
func (a *App) LockCoupon(ctx context.Context, couponID uint64, r coupon.LockRequest) (coupon.Lock, error) {
	if err := r.Validate(); err != nil {
		return coupon.Lock{}, err
	}
	// The deadline is stored to the millisecond (DATETIME(3)); cut it there
	// before answering, so a retry that reads it back gets exactly the
	// deadline the first answer carried.
	until := a.now().Add(a.cfg.LockTTL).Truncate(time.Millisecond)
	lock, same, err := a.locks.Lock(ctx, a.lockEnv(), couponID, r, until)
	if err != nil {
		if reason, ok := coupon.RefusalReason(err); ok {
			a.metrics.lockRequests.WithLabelValues(reason).Inc()
		}
		return coupon.Lock{}, fmt.Errorf("lock coupon %d for order %s: %w", couponID, r.OrderNo, err)
	}
	if same {
		a.metrics.lockRequests.WithLabelValues(lockSameLock).Inc()
		a.log.InfoContext(ctx, "coupon already locked by this order, same lock returned", "coupon_id", couponID,
			"order_no", r.OrderNo, "attempt", r.Attempt, "locked_until", lock.LockedUntil)
	} else {
		a.metrics.lockRequests.WithLabelValues(lockLocked).Inc()
		a.log.InfoContext(ctx, "coupon locked", "coupon_id", couponID, "order_no", r.OrderNo, "attempt", r.Attempt,
			"discount_amount", lock.DiscountAmount, "locked_until", lock.LockedUntil)
	}
	return lock, nil
}

func (a *App) lockEnv() LockEnv {
	return LockEnv{Store: a.store, Now: a.now, Template: a.Template, LockTTL: a.cfg.LockTTL, HoldLease: a.cfg.LockHoldLease}
}

// FixedLockKeeper takes and releases locks so that no lock lands after its
// own release and no release frees a coupon that another attempt of its
// order may still commit with:
//
//   - Release records, in the transaction of its conditional update, that
//     this attempt of the order released, whether or not it found the lock
//     (RecordRelease); the record lasts the lock TTL. Lock is refused with
//     coupon.ErrReleased when the record is there, so a lock request that
//     arrives after its own release (delayed on the network while its order
//     timed out and gave up) never holds the coupon.
//   - The lock is re-entrant per order number: concurrent copies of one
//     request share it. Each attempt that locks, or re-enters, leaves a hold
//     (HoldLock) lasting LockEnv.HoldLease, longer than an attempt can
//     live. Release drops its own attempt's hold and frees the coupon only
//     when no other attempt of the order holds a live one; otherwise the
//     lock is left to that sibling, which may still commit its order. A
//     crashed attempt's hold lapses with its lease, so it never pins the
//     coupon past it; a committed order needs no hold, and the sweep job
//     deletes expired holds in batches.
//
// Lock and Release both start with the coupon's row lock, so they run one
// after the other on a coupon: the decision, the records and the
// conditional updates UNUSED -> LOCKED and LOCKED -> UNUSED are taken on the
// locked row. Orders racing for one coupon queue on it: the first locks,
// the others read it LOCKED and are refused with coupon.ErrNotAvailable.
// The unique key on locked_order_no keeps an order to one coupon.
type FixedLockKeeper struct{}

// Lock implements LockKeeper.
func (FixedLockKeeper) Lock(ctx context.Context, env LockEnv, couponID uint64, r coupon.LockRequest, until time.Time) (coupon.Lock, bool, error) {
	var lock coupon.Lock
	var same bool
	err := env.Store.InTx(ctx, func(tx coupon.Tx) error {
		c, err := tx.CouponForUpdate(ctx, couponID)
		if err != nil {
			return err
		}
		released, err := tx.Released(ctx, c.ID, r.OrderNo, r.Attempt)
		if err != nil {
			return err
		}
		if released {
			return fmt.Errorf("%w: attempt %q of order %s released coupon %d already", coupon.ErrReleased, r.Attempt, r.OrderNo, c.ID)
		}
		t, err := env.Template(ctx, c.TemplateID)
		if err != nil {
			return err
		}
		now := env.Now()
		decision, err := c.DecideLock(t, r, now)
		if err != nil {
			return err
		}
		if decision == coupon.AlreadyDone {
			lock, same = c.HeldLock(t), true
		} else {
			n, err := tx.LockCoupon(ctx, c.ID, r.OrderNo, until, now)
			switch {
			case err != nil:
				return err
			case n != 1:
				// The row is locked and was read UNUSED: nothing can have
				// changed it.
				return fmt.Errorf("coupon %d: %w", c.ID, coupon.ErrConcurrentChange)
			}
			lock = coupon.Lock{CouponID: c.ID, OrderNo: r.OrderNo, DiscountAmount: t.DiscountAmount, LockedUntil: until}
		}
		return tx.HoldLock(ctx, c.ID, r.OrderNo, r.Attempt, now, now.Add(env.HoldLease))
	})
	if err != nil {
		return coupon.Lock{}, false, err
	}
	return lock, same, nil
}

// Release implements LockKeeper: under the coupon's row lock, the release
// record, the end of this attempt's hold and, when no other attempt of the
// order holds the lock, the conditional update LOCKED by orderNo -> UNUSED.
// An unknown coupon has nothing to release and no lock that could land.
func (FixedLockKeeper) Release(ctx context.Context, env LockEnv, couponID uint64, orderNo, attempt string) (ReleaseOutcome, error) {
	outcome := ReleaseNotHeld
	err := env.Store.InTx(ctx, func(tx coupon.Tx) error {
		c, err := tx.CouponForUpdate(ctx, couponID)
		if err != nil {
			return err
		}
		now := env.Now()
		if err := tx.RecordRelease(ctx, c.ID, orderNo, attempt, now, now.Add(env.LockTTL)); err != nil {
			return err
		}
		if err := tx.DropHold(ctx, c.ID, orderNo, attempt); err != nil {
			return err
		}
		if c.Status != coupon.StatusLocked || c.LockedOrderNo != orderNo {
			return nil
		}
		held, err := tx.LiveHolds(ctx, c.ID, orderNo, now)
		switch {
		case err != nil:
			return err
		case held > 0:
			outcome = ReleaseLeftToSibling
			return nil
		}
		n, err := tx.ReleaseLock(ctx, c.ID, orderNo, now)
		switch {
		case err != nil:
			return err
		case n != 1:
			// The row is locked and was read LOCKED by orderNo.
			return fmt.Errorf("coupon %d: %w", c.ID, coupon.ErrConcurrentChange)
		}
		outcome = ReleaseFreed
		return nil
	})
	if errors.Is(err, coupon.ErrNotFound) {
		return ReleaseNotHeld, nil
	}
	if err != nil {
		return ReleaseNotHeld, err
	}
	return outcome, nil
}
