// Package messaging connects the coupon service to the events it consumes
// (order.paid, order.cancelled): each function returns a platform.Consumer
// whose handler decodes the pkg/events payload, converts it to the use
// case's input and calls it in the inbox's transaction.
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

// OrderPaidConsumer is the durable consumer name of order.paid, also its
// inbox deduplication scope.
const OrderPaidConsumer = "coupon-order-paid"

// OrderPaid consumes order.paid. Its handler only lands the event (one row
// in coupon_message, in the inbox's transaction); the deduction runs later
// from the retry job, which is what the incident's pipeline did. A payload
// that cannot be read, or that the domain refuses, is dead-lettered at once.
func OrderPaid(a *app.App, st *store.Store) platform.Consumer {
	return platform.Consumer{
		Name:    OrderPaidConsumer,
		Subject: events.OrderPaid,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			var e events.OrderPaidV1
			if err := inbox.DecodeJSON(msg, &e); err != nil {
				return err
			}
			if err := a.LandOrderPaid(ctx, st.BindTx(tx), toOrderPaid(msg.ID, e)); err != nil {
				if coupon.IsPermanent(err) {
					return inbox.Permanent(err)
				}
				return err
			}
			return nil
		},
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
