package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// OrderCancelledEventID is the outbox message id of an order's
// order.cancelled event: one per order, so a second close can never write
// a second event.
func OrderCancelledEventID(orderNo string) string { return "order-cancelled-" + orderNo }

// closeOrder closes o, read a moment ago, for reason, and returns the
// order as it ends up and whether this call cancelled it:
//
//  1. an order already CANCELLED is returned as it is; a PAID one is
//     order.ErrConflict;
//  2. the payment service closes the order's charge (Payments), so that
//     no payment can land after the order closes. "paid" means the
//     customer paid first: the order is not closed (order.ErrConflict;
//     payment.succeeded is on its way). No answer is order.ErrUnavailable
//     and changes nothing;
//  3. one transaction: WAIT_PAY → CANCELLED by the conditional update of
//     Tx.UpdateOrder under the order's row lock, every reservation
//     RESERVED → RELEASED with its units back in stock, and
//     order.cancelled.
//
// Two closers of one order (the job on two replicas, the job and the
// owner) both get to step 3; the second to lock the row finds it CANCELLED
// and changes nothing. A payment applied between steps 2 and 3 (the
// platform answered "closed" although the charge was paid) is found PAID
// under the lock: order.ErrConflict, and the payment service refunds it.
func (a *App) closeOrder(ctx context.Context, o order.Order, reason string) (order.Order, bool, error) {
	switch o.Status {
	case order.StatusCancelled:
		a.m.closes.WithLabelValues(reason, "already_cancelled").Inc()
		return o, false, nil
	case order.StatusPaid:
		a.m.closes.WithLabelValues(reason, "paid").Inc()
		return order.Order{}, false, fmt.Errorf("%w: order %s is paid", order.ErrConflict, o.No)
	}
	outcome, err := a.payments.CloseCharge(ctx, o.No)
	if err != nil {
		a.m.closes.WithLabelValues(reason, "failed").Inc()
		return order.Order{}, false, fmt.Errorf("close order %s: %w", o.No, err)
	}
	if outcome == order.ChargePaid {
		a.m.closes.WithLabelValues(reason, "paid").Inc()
		a.log.InfoContext(ctx, "order not closed: the payment service found its charge paid", "order_no", o.No, "reason", reason)
		return order.Order{}, false, fmt.Errorf("%w: order %s was paid; its payment is being applied", order.ErrConflict, o.No)
	}

	var closed order.Order
	cancelled := false
	err = a.orders.InTx(ctx, func(tx order.Tx) error {
		err := tx.UpdateOrder(ctx, o.No, func(cur *order.Order) error {
			var err error
			cancelled, err = cur.Cancel(reason, a.now())
			closed = *cur
			return err
		})
		if err != nil || !cancelled {
			return err
		}
		lines := make([]order.Line, len(closed.Items))
		for i, it := range closed.Items {
			lines[i] = it.Line()
		}
		released, err := tx.ReleaseReservations(ctx, o.No, lines, a.now())
		if err != nil {
			return err
		}
		if released != len(lines) {
			return fmt.Errorf("order %s has %d items but %d reservations were RESERVED to release", o.No, len(lines), released)
		}
		return tx.AddEvent(ctx, orderCancelled(closed))
	})
	switch {
	case errors.Is(err, order.ErrConflict):
		a.m.closes.WithLabelValues(reason, "paid").Inc()
		return order.Order{}, false, err
	case err != nil:
		a.m.closes.WithLabelValues(reason, "failed").Inc()
		return order.Order{}, false, fmt.Errorf("close order %s: %w", o.No, err)
	case cancelled:
		a.m.closes.WithLabelValues(reason, "cancelled").Inc()
		a.log.InfoContext(ctx, "order cancelled", "order_no", o.No, "reason", reason, "items", len(closed.Items), "coupon_id", closed.CouponID)
	default:
		a.m.closes.WithLabelValues(reason, "already_cancelled").Inc()
	}
	return closed, cancelled, nil
}

// orderCancelled is the order.cancelled event of o, just cancelled.
func orderCancelled(o order.Order) events.Event {
	return events.Event{ID: OrderCancelledEventID(o.No), Subject: events.OrderCancelled, Payload: events.OrderCancelledV1{
		OrderNo: o.No, UserID: o.UserID, CouponID: o.CouponID, Reason: o.CancelReason, CancelledAt: *o.CancelledAt,
	}}
}
