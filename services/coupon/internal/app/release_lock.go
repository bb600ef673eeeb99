package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// ReleaseLock releases the lock orderNo holds on couponID and reports
// whether it did (POST /internal/coupons/{id}/release): the order service
// calls it when the order it locked the coupon for fails to commit. Only
// the holder's lock is released, and only once: the conditional update
// LOCKED by orderNo -> UNUSED matches nothing when the coupon is unknown,
// already released, used, or locked by another order, and that is
// answered false rather than as an error, so a repeated release is
// harmless.
func (a *App) ReleaseLock(ctx context.Context, couponID uint64, orderNo string) (bool, error) {
	if orderNo == "" || len(orderNo) > 64 {
		return false, fmt.Errorf("%w: order_no must be 1 to 64 characters", coupon.ErrInvalid)
	}
	n, err := a.store.ReleaseLock(ctx, couponID, orderNo, a.now())
	if err != nil {
		return false, fmt.Errorf("release coupon %d of order %s: %w", couponID, orderNo, err)
	}
	if n == 0 {
		a.log.InfoContext(ctx, "release asked for a lock the order does not hold", "coupon_id", couponID, "order_no", orderNo)
		return false, nil
	}
	a.metrics.lockReleases.WithLabelValues(releasedByCall).Inc()
	a.log.InfoContext(ctx, "coupon lock released", "coupon_id", couponID, "order_no", orderNo, "by", releasedByCall)
	return true, nil
}
