package catalogapp

import "context"

// DeleteProduct deletes a live product logically; its name and model can be
// used by a new product as soon as this returns.
func (a *App) DeleteProduct(ctx context.Context, id uint64) error {
	return a.store.DeleteProduct(ctx, id)
}
