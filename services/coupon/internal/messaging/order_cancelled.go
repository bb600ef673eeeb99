package messaging

import (
	"context"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
)

// OrderCancelledConsumer is the durable consumer name of order.cancelled,
// also its inbox deduplication scope.
const OrderCancelledConsumer = "coupon-order-cancelled"

// OrderCancelled consumes order.cancelled: its handler releases the
// cancelled order's coupon lock in the inbox's transaction, once however
// often the event is delivered (the inbox deduplicates the message id, and
// the release is a conditional update on the order holding the lock).
func OrderCancelled(a *app.App, st *store.Store) platform.Consumer {
	return platform.Consumer{
		Name:    OrderCancelledConsumer,
		Subject: events.OrderCancelled,
		Handle: handle(st, func(ctx context.Context, tx coupon.Tx, id string, e events.OrderCancelledV1) error {
			return a.ReleaseCancelledOrder(ctx, tx, toOrderCancelled(id, e))
		}),
	}
}

// toOrderCancelled converts the wire event to the use case's input; an
// order without a coupon has CouponID 0.
func toOrderCancelled(messageID string, e events.OrderCancelledV1) app.OrderCancelled {
	in := app.OrderCancelled{MessageID: messageID, OrderNo: e.OrderNo, Reason: e.Reason}
	if e.CouponID != nil {
		in.CouponID = *e.CouponID
	}
	return in
}
