package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// closeChargeFixed asks the payment service to close the order's charge
// (POST /internal/orders/{no}/close) before the order is closed. The
// payment service closes it at the platform, or records that the order can
// no longer be paid when it has no payment yet, so a customer who pays
// after this point is refused by the platform; one who paid before it gets
// "paid", and the order is not closed.
func (a *App) closeChargeFixed(ctx context.Context, orderNo string) (order.ChargeOutcome, error) {
	return a.payments.CloseCharge(ctx, orderNo)
}
