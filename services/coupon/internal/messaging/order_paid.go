package messaging

import (
	"context"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
)

// OrderPaidConsumer is the durable consumer name of order.paid, also its
// inbox deduplication scope.
const OrderPaidConsumer = "coupon-order-paid"

// OrderPaid consumes order.paid. Its handler lands the event (one row in
// coupon_message, in the inbox's transaction) and deducts the coupon once
// that transaction has committed; the retry job takes what the attempt left
// PENDING (app.ReceiveOrderPaid).
func OrderPaid(a *app.App, st *store.Store) platform.Consumer {
	return platform.Consumer{
		Name:    OrderPaidConsumer,
		Subject: events.OrderPaid,
		Handle: handle(st, func(ctx context.Context, tx coupon.Tx, id string, e events.OrderPaidV1) error {
			return a.ReceiveOrderPaid(ctx, tx, toOrderPaid(id, e))
		}),
	}
}

// toOrderPaid converts the wire event to the use case's input; an order
// without a coupon has CouponID 0.
func toOrderPaid(messageID string, e events.OrderPaidV1) app.OrderPaid {
	in := app.OrderPaid{MessageID: messageID, OrderNo: e.OrderNo, UserID: e.UserID}
	if e.CouponID != nil {
		in.CouponID = *e.CouponID
	}
	return in
}
