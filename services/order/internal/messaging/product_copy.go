package messaging

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// ProductCopyConsumer is the durable consumer name of the batch-copy
// workers.
const ProductCopyConsumer = "order-product-copy"

// ProductTxs binds an inbox handler's transaction to the catalog's Tx
// (store.Products does).
type ProductTxs interface {
	InboxTx(ctx context.Context, tx *gorm.DB) product.Tx
}

// ProductCopy consumes product.batch_copy with workers concurrent workers:
// each chunk's products, its counters and the processed-message row commit
// in one transaction, so a redelivery never copies or counts twice. The
// chunk travels as the JSON of product.CopyChunk (StartCopy writes it); a
// chunk that cannot be read, names no job of this service or an unknown
// duplicate policy is permanent, since no redelivery changes it.
func ProductCopy(a *app.App, txs ProductTxs, workers int) platform.Consumer {
	return platform.Consumer{
		Name:    ProductCopyConsumer,
		Subject: events.ProductBatchCopy,
		Workers: workers,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			var c product.CopyChunk
			if err := inbox.DecodeJSON(msg, &c); err != nil {
				return err
			}
			_, err := a.CopyChunk(ctx, txs.InboxTx(ctx, tx), c)
			if errors.Is(err, product.ErrNotFound) || errors.Is(err, product.ErrInvalid) {
				return inbox.Permanent(err)
			}
			return err
		},
	}
}
