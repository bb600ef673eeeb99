package app

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// OrderPaid is what the coupon service needs from an order.paid event.
type OrderPaid struct {
	MessageID string
	OrderNo   string
	UserID    uint64
	CouponID  uint64 // 0 when the order used no coupon
}

// ReceiveOrderPaid is what the order.paid consumer does with a delivery,
// inside tx, the inbox consumer's transaction: the event is acknowledged
// if and only if what it did commits with the inbox's row. With the fixed
// deduction, a coupon LOCKED by the order is deducted right there, and
// the message lands SUCCESS in the same commit
// (FixedDeducer.DeductOnDelivery): the happy path waits for no retry pass
// and costs one transaction. An order without a coupon needs nothing; a
// message id seen before is a no-op.
//
// Otherwise (the coupon is used already, or not the order's to use; or a
// lab's deducer is plugged in) the message lands PENDING, due only after
// the claim lease as if this delivery had claimed it, and one attempt is
// made once the transaction has committed: the attempt the retry pass
// makes (ProcessMessage), which tells an absorbed duplicate from a
// refusal. The pass takes the message only if that attempt failed (it
// then reschedules it with its backoff) or never ran (the process died
// after the commit). That keeps incident 1 as it is: what the pass
// retries is exactly what an attempt left PENDING.
func (a *App) ReceiveOrderPaid(ctx context.Context, tx coupon.Tx, e OrderPaid) error {
	if e.CouponID == 0 {
		return nil
	}
	now := a.now()
	m, err := a.message(ctx, e, now)
	if err != nil {
		return err
	}
	if fixed, ok := a.deducer.(DeliveryDeducer); ok {
		start := time.Now()
		deducted, err := fixed.DeductOnDelivery(ctx, tx, m, now)
		if err != nil {
			return fmt.Errorf("deduct coupon %d for order %s on delivery: %w", m.CouponID, m.OrderNo, err)
		}
		if deducted {
			_, end := a.startDeduction(ctx, m, trace.WithTimestamp(start))
			end(Deducted)
			tx.AfterCommit(ctx, func() { a.metrics.deductions.WithLabelValues(string(fixed.Mode())).Inc() })
			return nil
		}
	}
	m.NextRetryAt = now.Add(a.cfg.ClaimLease)
	landed, err := a.land(ctx, tx, &m)
	if err != nil || !landed {
		return err
	}
	tx.AfterCommit(ctx, func() { a.attempt(context.WithoutCancel(ctx), m) })
	return nil
}

// LandOrderPaid lands the event PENDING, due at once and with no attempt
// of its own: the message waits for the retry pass, which is how the
// incident's pipeline deducted every coupon (the lab lands its messages
// this way).
func (a *App) LandOrderPaid(ctx context.Context, tx coupon.Tx, e OrderPaid) error {
	if e.CouponID == 0 {
		return nil
	}
	m, err := a.message(ctx, e, a.now())
	if err != nil {
		return err
	}
	_, err = a.land(ctx, tx, &m)
	return err
}

// message is e's PENDING message at now, with the trace of ctx.
func (a *App) message(ctx context.Context, e OrderPaid, now time.Time) (coupon.Message, error) {
	m, err := coupon.NewMessage(e.MessageID, e.OrderNo, e.UserID, e.CouponID, now)
	if err != nil {
		return coupon.Message{}, err
	}
	m.Trace = a.traceOf(ctx)
	return m, nil
}

// land writes m; landed is false when its message id is there already
// (the inbox deduplicates; the unique key on coupon_message is the second
// line).
func (a *App) land(ctx context.Context, tx coupon.Tx, m *coupon.Message) (landed bool, err error) {
	inserted, err := tx.InsertMessage(ctx, m)
	if err != nil {
		return false, fmt.Errorf("land order.paid %s: %w", m.MessageID, err)
	}
	if !inserted {
		a.log.InfoContext(ctx, "order.paid already landed", "message_id", m.MessageID, "order_no", m.OrderNo)
	}
	return inserted, nil
}
