// Package messaging holds the order service's consumers: each returns a
// platform.Consumer whose handler decodes its event, converts it to domain
// types and calls a use case with the inbox transaction's Tx.
package messaging

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// OrderTxs binds an inbox handler's transaction to the orders' Tx
// (store.Store does).
type OrderTxs interface {
	InboxTx(ctx context.Context, tx *gorm.DB) order.Tx
}

// PaymentSucceeded consumes payment.succeeded: the paid order moves to PAID
// and order.paid is written, in the transaction that records the message
// as processed. A payment the order cannot take (cancelled, paid by another
// payment, another amount, unknown) is permanent: the inbox records it dead
// with the reason and logs it, for a person who may refund the payment.
func PaymentSucceeded(a *app.App, txs OrderTxs) platform.Consumer {
	return platform.Consumer{
		Name:    app.PaymentSucceededConsumer,
		Subject: events.PaymentSucceeded,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			var ev events.PaymentSucceededV1
			if err := inbox.DecodeJSON(msg, &ev); err != nil {
				return err
			}
			_, err := a.MarkOrderPaid(ctx, txs.InboxTx(ctx, tx), ev.OrderNo, toPayment(ev))
			if app.IsPermanent(err) {
				return inbox.Permanent(err)
			}
			if err != nil {
				return fmt.Errorf("mark order %s paid: %w", ev.OrderNo, err)
			}
			return nil
		},
	}
}

func toPayment(ev events.PaymentSucceededV1) order.Payment {
	return order.Payment{No: ev.PaymentNo, Amount: ev.Amount, PaidAt: ev.PaidAt}
}
