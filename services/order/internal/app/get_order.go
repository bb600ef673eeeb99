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

// MaxOrdersPage bounds a page of GET /orders; DefaultOrdersPage is a page
// without a limit.
const (
	MaxOrdersPage     = 100
	DefaultOrdersPage = 20
)

// ListOrders returns a page of userID's orders, newest first: those placed
// before order before when it is set (it must be userID's, or
// order.ErrNotFound). A limit of 0 is DefaultOrdersPage, one above
// MaxOrdersPage is MaxOrdersPage. Another user's orders are never in it.
func (a *App) ListOrders(ctx context.Context, userID uint64, before string, limit int) ([]order.Order, error) {
	switch {
	case limit <= 0:
		limit = DefaultOrdersPage
	case limit > MaxOrdersPage:
		limit = MaxOrdersPage
	}
	return a.orders.UserOrders(ctx, userID, before, limit)
}

// LookupOrder returns order no, without its items, for another service (the
// coupon sweeper, the payment service), which is trusted by the internal
// token rather than by the order's owner.
func (a *App) LookupOrder(ctx context.Context, no string) (order.Order, error) {
	return a.orders.Head(ctx, no)
}
