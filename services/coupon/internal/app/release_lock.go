package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// ReleaseLock releases the lock attempt of orderNo holds on couponID and
// reports whether it did (POST /internal/coupons/{id}/release): the order
// service calls it when the order it locked the coupon for fails to commit,
// also when its lock call got no answer. Only the holder's lock is
// released, and only once: a coupon that is unknown, already released,
// used, or locked by another order is answered false rather than as an
// error, so a repeated release is harmless. Whether or not it found the
// lock, the release is remembered for the lock TTL: a lock request of this
// attempt that arrives later is refused (FixedLockKeeper).
func (a *App) ReleaseLock(ctx context.Context, couponID uint64, orderNo, attempt string) (bool, error) {
	if orderNo == "" || len(orderNo) > 64 {
		return false, fmt.Errorf("%w: order_no must be 1 to 64 characters", coupon.ErrInvalid)
	}
	if err := coupon.CheckAttempt(attempt); err != nil {
		return false, err
	}
	released, err := a.locks.Release(ctx, a.lockEnv(), couponID, orderNo, attempt)
	if err != nil {
		return false, fmt.Errorf("release coupon %d of order %s: %w", couponID, orderNo, err)
	}
	if !released {
		a.log.InfoContext(ctx, "release asked for a lock the order does not hold", "coupon_id", couponID, "order_no", orderNo, "attempt", attempt)
		return false, nil
	}
	a.metrics.lockReleases.WithLabelValues(releasedByCall).Inc()
	a.log.InfoContext(ctx, "coupon lock released", "coupon_id", couponID, "order_no", orderNo, "attempt", attempt, "by", releasedByCall)
	return true, nil
}

// ForgetReleases is the sweep job's second step: it deletes the release
// records whose lock TTL has passed, in batches of Config.SweepBatch, and
// returns how many it deleted.
func (a *App) ForgetReleases(ctx context.Context) (int64, error) {
	var total int64
	now := a.now()
	for {
		n, err := a.store.ForgetReleases(ctx, now, a.cfg.SweepBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(a.cfg.SweepBatch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}
