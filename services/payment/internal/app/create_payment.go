package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// CreatePayment creates the payment for an order of userID, charging the
// order's pay_amount as the order service reports it, and asks the platform
// to charge it. The order service answers only the order's owner (404 to
// anyone else), so a caller can pay only their own orders. It is idempotent
// per order: a second call finds the first payment (unique key on order_no)
// and, while it still waits for payment, charges it again, which the
// platform answers with the same transaction because it keys charges by
// out_trade_no. A closed order cannot be paid: the order service says
// CANCELLED, or the close left a CLOSED payment behind (the unique order_no
// makes a create that comes after the close find it), or the platform
// refuses a charge it has closed. created reports whether this call
// inserted the payment.
func (a *App) CreatePayment(ctx context.Context, userID uint64, orderNo string) (p payment.Payment, created bool, err error) {
	if a.orders == nil || a.platform == nil {
		return payment.Payment{}, false, errors.New("create payment: no order service or platform configured")
	}
	order, err := a.orders.Order(ctx, userID, orderNo)
	if err != nil {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: %w", orderNo, err)
	}
	switch {
	case order.UserID != userID:
		// The order service refuses other callers; this is the second line,
		// should an answer ever name someone else.
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s of another user: %w", orderNo, payment.ErrOrderNotFound)
	case order.Status == payment.OrderCancelled:
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: %w", orderNo, payment.ErrOrderClosed)
	case order.Status != payment.OrderWaitPay:
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s in status %s: %w", orderNo, order.Status, payment.ErrOrderNotPayable)
	case order.PayAmount <= 0:
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s with pay_amount %d: %w", orderNo, order.PayAmount, payment.ErrOrderNotPayable)
	}
	p, created, err = a.store.Create(ctx, payment.Payment{
		OutTradeNo: newOutTradeNo(a.now().Format("20060102150405")),
		OrderNo:    order.OrderNo,
		UserID:     userID,
		Amount:     order.PayAmount,
		Status:     payment.StatusWaitPay,
	})
	if err != nil {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: %w", orderNo, err)
	}
	switch {
	case p.Closed():
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: payment %s is %s: %w", orderNo, p.OutTradeNo, p.Status, payment.ErrOrderClosed)
	case p.Status != payment.StatusWaitPay:
		return p, created, nil
	}
	_, err = a.platform.Charge(ctx, psp.ChargeRequest{OutTradeNo: p.OutTradeNo, Amount: p.Amount, NotifyURL: a.cfg.NotifyURL})
	switch {
	case errors.Is(err, psp.ErrChargeClosed):
		// The order's close reached the platform between our insert and
		// this charge; the close has moved (or is moving) the payment to
		// CLOSED.
		return payment.Payment{}, false, fmt.Errorf("charge payment %s: %w", p.OutTradeNo, errors.Join(payment.ErrOrderClosed, err))
	case err != nil:
		// The payment stays WAIT_PAY; creating it again retries the charge.
		return p, created, fmt.Errorf("charge payment %s: %w", p.OutTradeNo, errors.Join(payment.ErrPlatformRejected, err))
	}
	a.log.InfoContext(ctx, "payment created", "out_trade_no", p.OutTradeNo, "order_no", p.OrderNo, "user_id", userID, "amount", p.Amount, "created", created)
	return p, created, nil
}

// newOutTradeNo returns "P", the creation time to the second and 8 random
// hex digits: unique, sortable and short enough for any platform.
func newOutTradeNo(stamp string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "P" + stamp + hex.EncodeToString(b[:])
}
