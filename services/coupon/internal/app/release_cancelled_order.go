package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// OrderCancelled is what the coupon service needs from an order.cancelled
// event.
type OrderCancelled struct {
	MessageID string
	OrderNo   string
	CouponID  uint64 // 0 when the order used no coupon
	Reason    string // "timeout" or "customer"
}

// ReleaseCancelledOrder releases the lock of a cancelled order inside tx,
// the inbox consumer's transaction. It releases once however often the
// event is delivered: the inbox deduplicates the message id, and the
// conditional update LOCKED by this order -> UNUSED matches nothing the
// second time, nor after the coupon has been locked again by another order.
// A coupon that is not locked by the order needs nothing; one USED by it
// is a cancelled order that was paid, logged as the anomaly it is.
func (a *App) ReleaseCancelledOrder(ctx context.Context, tx coupon.Tx, e OrderCancelled) error {
	if e.CouponID == 0 {
		return nil
	}
	if e.OrderNo == "" || len(e.OrderNo) > 64 {
		return fmt.Errorf("%w: order.cancelled %s: order_no must be 1 to 64 characters", coupon.ErrInvalid, e.MessageID)
	}
	n, err := tx.ReleaseLock(ctx, e.CouponID, e.OrderNo, a.now())
	if err != nil {
		return fmt.Errorf("release coupon of cancelled order %s: %w", e.OrderNo, err)
	}
	if n == 1 {
		// Counted once the inbox's transaction commits: a delivery that
		// rolls back released nothing.
		tx.AfterCommit(ctx, func() {
			a.metrics.lockReleases.WithLabelValues(releasedByCancelled).Inc()
			a.log.InfoContext(ctx, "coupon lock released", "coupon_id", e.CouponID, "order_no", e.OrderNo,
				"by", releasedByCancelled, "cancel_reason", e.Reason)
		})
		return nil
	}
	c, err := tx.CouponForUpdate(ctx, e.CouponID)
	switch {
	case errors.Is(err, coupon.ErrNotFound):
		a.log.WarnContext(ctx, "order.cancelled names an unknown coupon", "coupon_id", e.CouponID, "order_no", e.OrderNo)
		return nil
	case err != nil:
		return fmt.Errorf("read coupon of cancelled order %s: %w", e.OrderNo, err)
	case c.Status == coupon.StatusUsed && c.UsedOrderNo == e.OrderNo:
		a.log.ErrorContext(ctx, "a cancelled order's coupon is USED by it: the order was paid and cancelled",
			"alert", "coupon_cancelled_order_used", "coupon_id", c.ID, "order_no", e.OrderNo)
	default:
		a.log.InfoContext(ctx, "cancelled order does not hold its coupon's lock, nothing to release",
			"coupon_id", c.ID, "order_no", e.OrderNo, "status", c.Status)
	}
	return nil
}
