package app

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/product"
)

// CopyProgress reports a batch copy's counters and completion, or
// product.ErrNotFound.
func (a *App) CopyProgress(ctx context.Context, jobID string) (product.CopyProgress, error) {
	return a.products.CopyProgress(ctx, jobID)
}
