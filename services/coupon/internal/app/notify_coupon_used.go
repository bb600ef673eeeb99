package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// CouponUsedEventID is the id of an order's coupon.used event (its
// Nats-Msg-Id), derived from the order so that the event has the same id
// whichever attempt writes it, and a consumer can deduplicate it.
func CouponUsedEventID(orderNo string) string { return "coupon-used-" + orderNo }

// notifyCouponUsed queues the "coupon used" notification for d's order inside
// the deduction's transaction, at most once per order. A notification is a
// stateless effect, with no state machine to ask whether it happened, so it is
// guarded by an idempotent record (biz_idempotent_record): the record and the
// event are written in the same transaction as the deduction, and the record's
// unique key lets only one transaction per order queue the event. Writing the
// record in its own transaction, before or after, would reopen the gap:
// before, a crash leaves a record for a notification never sent; after,
// concurrent attempts both pass.
func (a *App) notifyCouponUsed(ctx context.Context, tx coupon.Tx, d coupon.Deduction) error {
	now := a.now()
	inserted, err := tx.InsertIdempotentRecord(ctx, coupon.IdempotentRecord{
		Key: coupon.NoticeKey(d.OrderNo), BizType: coupon.BizCouponUsedNotice, BizNo: d.OrderNo,
		CreatedAt: now, ExpireTime: now.Add(a.cfg.NoticeRetention),
	})
	if err != nil {
		return err
	}
	if !inserted {
		a.metrics.noticesDeduped.Inc()
		a.log.InfoContext(ctx, "coupon used notice already sent", "order_no", d.OrderNo)
		return nil
	}
	if err := tx.AddEvent(ctx, events.Event{ID: CouponUsedEventID(d.OrderNo), Subject: events.CouponUsed,
		Payload: events.CouponUsedV1{OrderNo: d.OrderNo, CouponID: d.CouponID, UserID: d.UserID,
			Amount: d.Amount, UsedAt: now}}); err != nil {
		return fmt.Errorf("queue coupon.used for order %s: %w", d.OrderNo, err)
	}
	a.metrics.noticesSent.Inc()
	return nil
}
