package messaging

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// ProductCopyConsumer is the durable consumer name of the batch-copy
// workers.
const ProductCopyConsumer = "order-product-copy"

// ProductCopy consumes product.batch_copy with workers workers: each chunk
// is copied in its message's transaction (app.App.CopyChunk). A chunk whose
// job is gone or whose duplicate policy is unknown is a dead letter.
func ProductCopy(a *app.App, workers int) platform.ConsumerOf[product.Tx] {
	return platform.ConsumerOf[product.Tx]{
		Name:    ProductCopyConsumer,
		Subject: events.ProductBatchCopy,
		Workers: workers,
		Handle: inbox.JSON(func(ctx context.Context, tx product.Tx, _ string, c product.CopyChunk) error {
			_, err := a.CopyChunk(ctx, tx, c)
			return err
		}, func(err error) bool { return errors.Is(err, product.ErrNotFound) || errors.Is(err, product.ErrInvalid) }),
	}
}
