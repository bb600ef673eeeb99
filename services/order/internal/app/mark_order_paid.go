package app

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// orderPaidEventPrefix starts the outbox message id of every order.paid
// event; the reconciler finds the events by it.
const orderPaidEventPrefix = "order-paid-"

// OrderPaidEventID is the outbox message id of an order's order.paid event.
// An order is paid once, so one id per order; a second attempt to write it
// would hit the unique key.
func OrderPaidEventID(orderNo string) string { return orderPaidEventPrefix + orderNo }

// MarkOrderPaid applies a successful payment to its order inside tx, the
// consumer's transaction: the conditional update WAIT_PAY → PAID (rows
// affected checked) and the order.paid outbox row. It reports whether it
// paid the order now (true: the caller wakes the relay after the commit).
//
// Redelivery and duplicate notifications are safe: if the update changes no
// row, the order is re-read under lock; already PAID by this same payment is
// success without effect; anything else (cancelled, paid by another
// payment, amount mismatch, unknown order) is a conflict returned as
// order.ErrConflict, order.ErrAmountMismatch or order.ErrNotFound, which no
// retry can fix.
func (a *App) MarkOrderPaid(ctx context.Context, tx *gorm.DB, ev events.PaymentSucceededV1) (bool, error) {
	if ev.OrderNo == "" || ev.PaymentNo == "" {
		return false, fmt.Errorf("%w: payment event without order_no or payment_no", order.ErrInvalid)
	}
	o, err := a.store.Get(ctx, tx, ev.OrderNo, false)
	if err != nil {
		return false, err
	}
	switch out, err := o.CheckPayment(ev.PaymentNo, ev.Amount); {
	case err != nil:
		return false, err
	case out == order.AlreadyPaidBySame:
		return false, nil
	}
	paidAt := ev.PaidAt
	if paidAt.IsZero() {
		paidAt = a.now()
	}
	changed, err := a.store.MarkPaid(tx, ev.OrderNo, ev.PaymentNo, paidAt)
	if err != nil {
		return false, err
	}
	if !changed {
		// Someone else moved the order between our read and our update.
		// The locking read sees the latest committed state whatever the
		// transaction's isolation level.
		now, err := a.store.Get(ctx, tx, ev.OrderNo, true)
		if err != nil {
			return false, err
		}
		out, err := now.CheckPayment(ev.PaymentNo, ev.Amount)
		switch {
		case err != nil:
			return false, err
		case out == order.AlreadyPaidBySame:
			return false, nil
		default:
			// WAIT_PAY under lock right after an update that matched no
			// row cannot happen; refuse rather than guess.
			return false, fmt.Errorf("%w: order %s is %s after a conditional update that changed nothing", order.ErrConflict, now.No, now.Status)
		}
	}
	msg, err := outbox.JSON(OrderPaidEventID(o.No), a.subjectPrefix+events.OrderPaid, events.OrderPaidV1{
		OrderNo: o.No, UserID: o.UserID, Amount: o.Amount, CouponID: o.CouponID, PaymentNo: ev.PaymentNo, PaidAt: paidAt,
	})
	if err != nil {
		return false, err
	}
	if err := outbox.Add(tx, msg); err != nil {
		return false, err
	}
	return true, nil
}

// IsPermanent reports whether err from a use case is a refusal that no
// retry will change.
func IsPermanent(err error) bool {
	return errors.Is(err, order.ErrInvalid) || errors.Is(err, order.ErrNotFound) ||
		errors.Is(err, order.ErrConflict) || errors.Is(err, order.ErrAmountMismatch)
}
