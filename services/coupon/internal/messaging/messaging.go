// Package messaging connects the coupon service to the events it consumes
// (order.paid, order.cancelled): each function returns a platform.Consumer
// whose handler decodes the pkg/events payload, converts it to the use
// case's input and calls it in the inbox's transaction.
package messaging

import (
	"context"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
)

// handle is a consumer's handler: it decodes the payload as E and hands
// it, with the message id, to apply in the inbox's transaction. A payload
// that cannot be read, or that the domain refuses (coupon.IsPermanent), is
// dead-lettered at once; any other error is redelivered.
func handle[E any](st *store.Store, apply func(ctx context.Context, tx coupon.Tx, messageID string, e E) error) inbox.Handler {
	return func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		var e E
		if err := inbox.DecodeJSON(msg, &e); err != nil {
			return err
		}
		err := apply(ctx, st.BindTx(tx), msg.ID, e)
		if coupon.IsPermanent(err) {
			return inbox.Permanent(err)
		}
		return err
	}
}
