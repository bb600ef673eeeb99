package app

import (
	"context"
	"fmt"
	"time"

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
// attempt that arrives later is refused (FixedLockKeeper). A lock that
// another attempt of the order still holds (a concurrent copy of the same
// request, which may yet commit) is left to it, also answered false.
func (a *App) ReleaseLock(ctx context.Context, couponID uint64, orderNo, attempt string) (bool, error) {
	if orderNo == "" || len(orderNo) > 64 {
		return false, fmt.Errorf("%w: order_no must be 1 to 64 characters", coupon.ErrInvalid)
	}
	if err := coupon.CheckAttempt(attempt); err != nil {
		return false, err
	}
	outcome, err := a.locks.Release(ctx, a.lockEnv(), couponID, orderNo, attempt)
	switch {
	case err != nil:
		return false, fmt.Errorf("release coupon %d of order %s: %w", couponID, orderNo, err)
	case outcome == ReleaseLeftToSibling:
		a.metrics.leftToSibling.Inc()
		a.log.InfoContext(ctx, "release leaves the lock to another attempt of the order, which still holds it",
			"coupon_id", couponID, "order_no", orderNo, "attempt", attempt)
		return false, nil
	case outcome != ReleaseFreed:
		a.log.InfoContext(ctx, "release asked for a lock the order does not hold", "coupon_id", couponID, "order_no", orderNo, "attempt", attempt)
		return false, nil
	}
	a.metrics.lockReleases.WithLabelValues(releasedByCall).Inc()
	a.log.InfoContext(ctx, "coupon lock released", "coupon_id", couponID, "order_no", orderNo, "attempt", attempt, "by", releasedByCall)
	return true, nil
}

// ForgetReleases is the sweep job's second step: it deletes the release
// records whose lock TTL has passed and the holds whose lease has, in
// batches of Config.SweepBatch, and returns how many rows it deleted.
func (a *App) ForgetReleases(ctx context.Context) (int64, error) {
	now := a.now()
	released, err := a.forget(ctx, now, a.store.ForgetReleases)
	if err != nil {
		return released, err
	}
	held, err := a.forget(ctx, now, a.store.ForgetHolds)
	return released + held, err
}

// forget runs one bounded delete of rows expired before now until a batch
// comes back short.
func (a *App) forget(ctx context.Context, now time.Time, batch func(context.Context, time.Time, int) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := batch(ctx, now, a.cfg.SweepBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < int64(a.cfg.SweepBatch) || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}
