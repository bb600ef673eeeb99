// Package messaging connects the payment service to the events it consumes:
// each function returns a platform.ConsumerOf[payment.Tx] whose handler
// decodes the pkg/events payload, converts it to the domain's type and calls
// a use case with the inbox transaction's Tx. The assembly binds it to the
// store (platform.Bind(st.InboxTx, ...)).
package messaging

import (
	"context"
	"errors"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// OrderCancelledConsumer is the durable consumer name of order.cancelled,
// also its inbox deduplication scope.
const OrderCancelledConsumer = "payment-order-cancelled"

// OrderCancelled consumes order.cancelled: the cancellation is recorded on
// the order's payment (or a CLOSED placeholder), in the transaction that
// records the message as processed, so it is recorded once however often
// the event is delivered. An event that cannot be read or names no order is
// dead-lettered at once.
func OrderCancelled(a *app.App) platform.ConsumerOf[payment.Tx] {
	return platform.ConsumerOf[payment.Tx]{
		Name:    OrderCancelledConsumer,
		Subject: events.OrderCancelled,
		Handle: inbox.JSON(func(ctx context.Context, tx payment.Tx, _ string, e events.OrderCancelledV1) error {
			return a.RecordOrderCancelled(ctx, tx, toCancellation(e))
		}, func(err error) bool { return errors.Is(err, app.ErrBadCancellation) }),
	}
}

func toCancellation(e events.OrderCancelledV1) payment.Cancellation {
	return payment.Cancellation{OrderNo: e.OrderNo, UserID: e.UserID, Reason: e.Reason, CancelledAt: e.CancelledAt}
}
