// Package messaging connects the payment service to the events it consumes:
// each function returns a platform.Consumer whose handler decodes the
// pkg/events payload, converts it to the domain's type and calls a use case
// with the inbox transaction's Tx.
package messaging

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// OrderCancelledConsumer is the durable consumer name of order.cancelled,
// also its inbox deduplication scope.
const OrderCancelledConsumer = "payment-order-cancelled"

// Txs binds an inbox handler's transaction to the payments' Tx
// (store.Store does).
type Txs interface {
	BindTx(ctx context.Context, tx *gorm.DB) payment.Tx
}

// OrderCancelled consumes order.cancelled: the cancellation is recorded on
// the order's payment (or a CLOSED placeholder), in the transaction that
// records the message as processed, so it is recorded once however often
// the event is delivered. An event that cannot be read or names no order is
// dead-lettered at once.
func OrderCancelled(a *app.App, txs Txs) platform.Consumer {
	return platform.Consumer{
		Name:    OrderCancelledConsumer,
		Subject: events.OrderCancelled,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			var e events.OrderCancelledV1
			if err := inbox.DecodeJSON(msg, &e); err != nil {
				return err
			}
			err := a.RecordOrderCancelled(ctx, txs.BindTx(ctx, tx), toCancellation(e))
			if errors.Is(err, app.ErrBadCancellation) {
				return inbox.Permanent(err)
			}
			return err
		},
	}
}

func toCancellation(e events.OrderCancelledV1) payment.Cancellation {
	return payment.Cancellation{OrderNo: e.OrderNo, UserID: e.UserID, Reason: e.Reason, CancelledAt: e.CancelledAt}
}
