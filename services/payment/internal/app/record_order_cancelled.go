package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// ErrBadCancellation is an order.cancelled event the payment service cannot
// record; no redelivery will change it.
var ErrBadCancellation = errors.New("order.cancelled names no order")

// RecordOrderCancelled records an order's cancellation on its payment, in
// tx, the inbox consumer's transaction (which also records the message as
// processed, so a redelivered event changes nothing). The earliest
// cancellation is kept, whatever order copies arrive in. An order that never had a payment gets a
// CLOSED placeholder carrying it, as the close inserts one: no payment can
// be created for a cancelled order. It decides nothing else: a payment's
// state changes only through the close, the notifications and the query,
// and the reconciler reports a PAID payment whose order was cancelled
// (which only a close that skipped this service can leave behind).
func (a *App) RecordOrderCancelled(ctx context.Context, tx payment.Tx, c payment.Cancellation) error {
	if c.OrderNo == "" {
		return ErrBadCancellation
	}
	placeholder := payment.Payment{
		OutTradeNo: newOutTradeNo(a.now().Format("20060102150405")),
		OrderNo:    c.OrderNo,
		UserID:     c.UserID,
		Status:     payment.StatusClosed,
	}
	recorded, err := tx.RecordCancellation(ctx, c, placeholder)
	if err != nil {
		return fmt.Errorf("record order %s cancelled: %w", c.OrderNo, err)
	}
	a.log.InfoContext(ctx, "order cancellation recorded", "order_no", c.OrderNo, "reason", c.Reason, "recorded", recorded)
	return nil
}
