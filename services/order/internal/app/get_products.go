package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// MaxPageSize bounds a page of GET /products?brand=.
const MaxPageSize = 500

// Product returns a live product, or product.ErrNotFound.
func (a *App) Product(ctx context.Context, id uint64) (product.Product, error) {
	return a.products.Product(ctx, id)
}

// ProductsByBrand returns a page of a brand's live products after afterID;
// a limit out of 1..MaxPageSize means MaxPageSize.
func (a *App) ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]product.Product, error) {
	if brand == "" {
		return nil, product.Invalidf("brand is required")
	}
	if limit <= 0 || limit > MaxPageSize {
		limit = MaxPageSize
	}
	return a.products.ProductsByBrand(ctx, brand, afterID, limit)
}
