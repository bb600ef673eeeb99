package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// closeChargeBroken is incident 6's broken variant (ORDER_CLOSE_MODE=broken,
// lab only): it does not ask the payment service and takes the charge as
// closed. What breaks: the customer's charge stays open at the platform, so
// a customer paying while the order closes (or after) is charged for an
// order that is CANCELLED, with its stock and coupon already released; the
// late payment.succeeded finds a cancelled order, and the money is kept for
// nothing shipped unless someone refunds it by hand.
func (a *App) closeChargeBroken(ctx context.Context, orderNo string) (order.ChargeOutcome, error) {
	a.log.WarnContext(ctx, "ORDER_CLOSE_MODE=broken: closing the order without closing its charge", "order_no", orderNo)
	return order.ChargeClosed, nil
}
