package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// GetOrder returns order no as its owner userID sees it. An order of
// another user is order.ErrNotFound, exactly like one that does not exist,
// so that no caller learns which order numbers exist.
func (a *App) GetOrder(ctx context.Context, userID uint64, no string) (order.Order, error) {
	o, err := a.orders.Get(ctx, no)
	if err != nil {
		return order.Order{}, err
	}
	if o.UserID != userID {
		return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	return o, nil
}

// LookupOrder returns order no, without its items, for another service (the
// coupon sweeper, the payment service), which is trusted by the internal
// token rather than by the order's owner.
func (a *App) LookupOrder(ctx context.Context, no string) (order.Order, error) {
	return a.orders.Head(ctx, no)
}
