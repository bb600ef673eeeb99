package app

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// OrderPaid is what the coupon service needs from an order.paid event.
type OrderPaid struct {
	MessageID string
	OrderNo   string
	UserID    uint64
	CouponID  uint64 // 0 when the order used no coupon
}

// ReceiveOrderPaid is what the order.paid consumer does with a delivery: it
// lands the event in the local message table inside tx, the inbox
// consumer's transaction, so the event is acknowledged if and only if its
// message row exists, and deducts the coupon as soon as that transaction has
// committed: the happy path waits for no retry pass. An order without a
// coupon needs nothing; a message id seen before is a no-op.
//
// The message is landed due only after the claim lease, as if this delivery
// had claimed it: the retry pass leaves it to the attempt made here, and
// takes it only if that attempt failed (the attempt then reschedules it
// with its backoff) or never ran (the process died after the commit). The
// attempt is the one the pass makes (ProcessMessage), which keeps incident
// 1 as it is: what the pass retries is exactly what an attempt left
// PENDING.
func (a *App) ReceiveOrderPaid(ctx context.Context, tx coupon.Tx, e OrderPaid) error {
	now := a.now()
	m, landed, err := a.land(ctx, tx, e, now, now.Add(a.cfg.ClaimLease))
	if err != nil || !landed {
		return err
	}
	tx.AfterCommit(ctx, func() { a.attempt(context.WithoutCancel(ctx), m) })
	return nil
}

// LandOrderPaid lands the event as ReceiveOrderPaid does, due at once and
// with no attempt of its own: the message waits for the retry pass, which
// is how the incident's pipeline deducted every coupon (the lab lands its
// messages this way).
func (a *App) LandOrderPaid(ctx context.Context, tx coupon.Tx, e OrderPaid) error {
	now := a.now()
	_, _, err := a.land(ctx, tx, e, now, now)
	return err
}

// land writes e's message, due at due; landed is false when there is
// nothing to deduct (no coupon) or the message id is there already (the
// inbox deduplicates; the unique key on coupon_message is the second line).
func (a *App) land(ctx context.Context, tx coupon.Tx, e OrderPaid, now, due time.Time) (m coupon.Message, landed bool, err error) {
	if e.CouponID == 0 {
		return coupon.Message{}, false, nil
	}
	if m, err = coupon.NewMessage(e.MessageID, e.OrderNo, e.UserID, e.CouponID, now); err != nil {
		return coupon.Message{}, false, err
	}
	m.NextRetryAt = due
	m.Trace = a.traceOf(ctx)
	inserted, err := tx.InsertMessage(ctx, &m)
	if err != nil {
		return coupon.Message{}, false, fmt.Errorf("land order.paid %s: %w", e.MessageID, err)
	}
	if !inserted {
		a.log.InfoContext(ctx, "order.paid already landed", "message_id", e.MessageID, "order_no", e.OrderNo)
	}
	return m, inserted, nil
}
