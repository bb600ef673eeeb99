// Package messaging holds the order service's consumers: each returns a
// platform.ConsumerOf the domain's Tx whose handler decodes its event,
// converts it to domain types and calls a use case in the inbox's
// transaction. The assembly binds it to the store (platform.Bind), so this
// package knows nothing of the database.
package messaging

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// PaymentSucceeded consumes payment.succeeded: the paid order moves to PAID
// and order.paid is written, in the transaction that records the message
// as processed. A payment the order cannot take (cancelled, paid by another
// payment, another amount, unknown) is permanent: the inbox records it dead
// with the reason and logs it, for a person who may refund the payment.
func PaymentSucceeded(a *app.App) platform.ConsumerOf[order.Tx] {
	return platform.ConsumerOf[order.Tx]{
		Name:    app.PaymentSucceededConsumer,
		Subject: events.PaymentSucceeded,
		Handle: inbox.JSON(func(ctx context.Context, tx order.Tx, _ string, ev events.PaymentSucceededV1) error {
			if _, err := a.MarkOrderPaid(ctx, tx, ev.OrderNo, toPayment(ev)); err != nil {
				return fmt.Errorf("mark order %s paid: %w", ev.OrderNo, err)
			}
			return nil
		}, app.IsPermanent),
	}
}

func toPayment(ev events.PaymentSucceededV1) order.Payment {
	return order.Payment{No: ev.PaymentNo, Amount: ev.Amount, PaidAt: ev.PaidAt}
}
