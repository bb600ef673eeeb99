package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// SetStock sets how many units of a live product can be ordered
// (PUT /admin/products/{id}/stock): an operator's count of what is on the
// shelf and not yet promised to an order. It replaces the number, so an
// order placed while it runs is either counted before it (and overwritten)
// or takes its units from the new number. product.ErrInvalid for a number
// outside 0..product.MaxStock, product.ErrNotFound for no such live
// product.
func (a *App) SetStock(ctx context.Context, productID uint64, available int) (product.Stock, error) {
	s, err := product.NewStock(productID, available)
	if err != nil {
		return product.Stock{}, err
	}
	return a.products.SetStock(ctx, s)
}
