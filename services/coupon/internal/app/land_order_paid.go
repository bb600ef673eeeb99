package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// OrderPaid is what the coupon service needs from an order.paid event.
type OrderPaid struct {
	MessageID string
	OrderNo   string
	UserID    uint64
	CouponID  uint64 // 0 when the order used no coupon
}

// LandOrderPaid writes the event into the local message table inside tx, the
// inbox consumer's transaction, so the event is acknowledged if and only if
// its message row exists. An order without a coupon needs nothing. A message
// id seen before is a no-op (the inbox already deduplicates; the unique key
// on coupon_message is the second line).
func (a *App) LandOrderPaid(ctx context.Context, tx coupon.Tx, e OrderPaid) error {
	if e.CouponID == 0 {
		return nil
	}
	m, err := coupon.NewMessage(e.MessageID, e.OrderNo, e.UserID, e.CouponID, a.now())
	if err != nil {
		return err
	}
	m.Trace = a.traceOf(ctx)
	inserted, err := tx.InsertMessage(ctx, &m)
	if err != nil {
		return fmt.Errorf("land order.paid %s: %w", e.MessageID, err)
	}
	if !inserted {
		a.log.InfoContext(ctx, "order.paid already landed", "message_id", e.MessageID, "order_no", e.OrderNo)
	}
	return nil
}
