// Package messaging connects the coupon service to JetStream: the inbox
// handler that lands order.paid events in the local message table.
package messaging

import (
	"context"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
)

// OrderPaidHandler returns the inbox handler for order.paid. It only lands
// the event (one row in coupon_message, in the inbox's transaction); the
// deduction runs later from the retry job, which is what the incident's
// pipeline did. subject is the order.paid subject (events.OrderPaid in
// production; tests use their own prefix); other subjects are acknowledged
// and ignored.
func OrderPaidHandler(a *app.App, st *store.Store, subject string) inbox.Handler {
	return func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
		if msg.Subject != subject {
			return nil
		}
		var e events.OrderPaidV1
		if err := inbox.DecodeJSON(msg, &e); err != nil {
			return err
		}
		in := app.OrderPaid{MessageID: msg.ID, OrderNo: e.OrderNo, UserID: e.UserID}
		if e.CouponID != nil {
			in.CouponID = *e.CouponID
		}
		if err := a.LandOrderPaid(ctx, st.BindTx(tx), in); err != nil {
			if coupon.IsPermanent(err) {
				return inbox.Permanent(err)
			}
			return err
		}
		return nil
	}
}
