package catalogapp

import (
	"context"

	"github.com/oncemall/oncemall/services/order/internal/catalog"
)

// CopyProgress reports a batch copy's counters and completion.
func (a *App) CopyProgress(ctx context.Context, jobID string) (catalog.CopyProgress, error) {
	return a.store.CopyProgress(ctx, jobID)
}
