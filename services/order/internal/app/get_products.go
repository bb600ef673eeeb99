package catalogapp

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// Product returns a live product.
func (a *App) Product(ctx context.Context, id uint64) (catalog.Product, error) {
	return a.store.Product(ctx, id)
}

// ProductsByBrand returns a page of a brand's live products after afterID.
func (a *App) ProductsByBrand(ctx context.Context, brand string, afterID uint64, limit int) ([]catalog.Product, error) {
	if brand == "" {
		return nil, catalog.ErrInvalidf("brand is required")
	}
	if limit <= 0 || limit > a.cfg.MaxPageSize {
		limit = a.cfg.MaxPageSize
	}
	return a.store.ProductsByBrand(ctx, brand, afterID, limit)
}
