package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// GetOrder returns the order numbered no, or order.ErrNotFound.
func (a *App) GetOrder(ctx context.Context, no string) (order.Order, error) {
	return a.orders.Get(ctx, no)
}
