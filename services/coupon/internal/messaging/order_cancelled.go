package messaging

import (
	"context"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
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
// the release is a conditional update on the order holding the lock). A
// payload that cannot be read, or that the domain refuses, is dead-lettered
// at once.
func OrderCancelled(a *app.App, st *store.Store) platform.Consumer {
	return platform.Consumer{
		Name:    OrderCancelledConsumer,
		Subject: events.OrderCancelled,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			var e events.OrderCancelledV1
			if err := inbox.DecodeJSON(msg, &e); err != nil {
				return err
			}
			if err := a.ReleaseCancelledOrder(ctx, st.BindTx(tx), toOrderCancelled(msg.ID, e)); err != nil {
				if coupon.IsPermanent(err) {
					return inbox.Permanent(err)
				}
				return err
			}
			return nil
		},
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
