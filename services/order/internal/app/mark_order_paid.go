package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// orderPaidEventPrefix starts the outbox message id of every order.paid
// event; the reconciler finds the events by it.
const orderPaidEventPrefix = "order-paid-"

// OrderPaidEventID is the outbox message id of an order's order.paid event.
// An order is paid once, so one id per order; a second attempt to write it
// would hit the unique key.
func OrderPaidEventID(orderNo string) string { return orderPaidEventPrefix + orderNo }

// MarkOrderPaid applies a successful payment p to order orderNo inside tx,
// the consumer's transaction: under the order's row lock (read without its
// items), WAIT_PAY → PAID (written with a conditional update whose rows
// affected the store checks), every stock reservation of the order
// RESERVED → CONFIRMED in one update by the order number, and the
// order.paid event: four statements. It reports whether it paid the order
// now.
//
// Redelivery and duplicate notifications are safe: concurrent deliveries
// wait on the row lock, and an order already PAID by this same payment is
// success without effect. Anything else (cancelled, paid by another
// payment, amount mismatch, unknown order) is order.ErrConflict,
// order.ErrAmountMismatch or order.ErrNotFound, which no retry can fix. So
// is an order with a reservation that is not RESERVED while it waited for
// payment: only a write around the use cases does that, and a person must
// look at it (the payment stays dead-lettered and reported).
//
// A cancellation racing the payment locks the same order row, so one of
// them runs first and the other finds the order PAID or CANCELLED: the
// reservations are confirmed or released, never both.
func (a *App) MarkOrderPaid(ctx context.Context, tx order.Tx, orderNo string, p order.Payment) (bool, error) {
	if orderNo == "" || p.No == "" {
		return false, fmt.Errorf("%w: payment without order_no or payment_no", order.ErrInvalid)
	}
	if p.PaidAt.IsZero() {
		p.PaidAt = a.now()
	}
	var paid order.Order
	changed := false
	items, err := tx.UpdateOrderRow(ctx, orderNo, func(o *order.Order) error {
		var err error
		changed, err = o.Pay(p, a.now())
		paid = *o
		return err
	})
	if err != nil {
		return false, err
	}
	if !changed {
		a.log.InfoContext(ctx, "payment for an order this payment already paid; no effect", "order_no", orderNo, "payment_no", p.No)
		return false, nil
	}
	confirmed, err := tx.ConfirmReservations(ctx, orderNo, a.now())
	if err != nil {
		return false, err
	}
	if confirmed != items {
		return false, fmt.Errorf("%w: order %s has %d items but %d reservations were RESERVED to confirm", order.ErrConflict, orderNo, items, confirmed)
	}
	if err := tx.AddEvent(ctx, orderPaid(paid)); err != nil {
		return false, err
	}
	return true, nil
}

// orderPaid is the order.paid event of o, just paid.
func orderPaid(o order.Order) events.Event {
	return events.Event{ID: OrderPaidEventID(o.No), Subject: events.OrderPaid, Payload: events.OrderPaidV1{
		OrderNo: o.No, UserID: o.UserID, Amount: o.PayAmount, CouponID: o.CouponID, PaymentNo: o.PaymentNo, PaidAt: *o.PaidAt,
	}}
}

// IsPermanent reports whether err from an order use case is a refusal that
// no retry will change.
func IsPermanent(err error) bool {
	return errors.Is(err, order.ErrInvalid) || errors.Is(err, order.ErrNotFound) ||
		errors.Is(err, order.ErrConflict) || errors.Is(err, order.ErrAmountMismatch)
}
