package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// CancelOrder is the owner's cancel (POST /orders/{no}/cancel): the order
// of userID numbered no is closed as closeOrder does, for reason
// "customer", and returned as it ends up. An order that is not the
// caller's is order.ErrNotFound; a paid order (or one whose charge the
// payment service finds paid) is order.ErrConflict; an order already
// cancelled is returned as it is, so a repeated cancel answers the same;
// a payment service that does not answer is order.ErrUnavailable, and the
// order stays WAIT_PAY.
func (a *App) CancelOrder(ctx context.Context, userID uint64, no string) (order.Order, error) {
	o, err := a.GetOrder(ctx, userID, no)
	if err != nil {
		return order.Order{}, err
	}
	closed, _, err := a.closeOrder(ctx, o, order.ReasonCustomer)
	return closed, err
}
