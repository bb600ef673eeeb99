package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// DeleteProduct deletes a live product logically; its name and model can be
// used by a new product as soon as this returns. product.ErrNotFound when
// there is no such live product.
func (a *App) DeleteProduct(ctx context.Context, id uint64) error {
	return retry(ctx, func() error {
		return a.products.InTx(ctx, func(tx product.Tx) error { return tx.DeleteProduct(ctx, id) })
	})
}
