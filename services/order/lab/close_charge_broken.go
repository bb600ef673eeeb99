package lab

import (
	"context"
	"log/slog"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// NoChargeClose is incident 6's broken variant (ORDER_CLOSE_MODE=broken):
// the order service's view of the payment service that never asks it and
// takes the charge as closed. The fix (app.Payments through
// internal/paymentclient) asks it first. What breaks: the customer's
// charge stays open at the platform, so a customer paying while the order
// closes (or after) is charged for an order that is CANCELLED, with its
// stock and coupon already released; the late payment.succeeded finds a
// cancelled order, and the money is kept for nothing shipped unless
// someone refunds it by hand.
type NoChargeClose struct {
	Log *slog.Logger // nil: slog.Default()
}

// CloseCharge answers order.ChargeClosed without asking anyone.
func (n NoChargeClose) CloseCharge(ctx context.Context, orderNo string) (order.ChargeOutcome, error) {
	log := n.Log
	if log == nil {
		log = slog.Default()
	}
	log.WarnContext(ctx, "ORDER_CLOSE_MODE=broken: closing the order without closing its charge", "order_no", orderNo)
	return order.ChargeClosed, nil
}
