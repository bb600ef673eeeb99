package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/psp"
)

// CreatePayment creates the payment for an order, its amount taken from the
// order service, and asks the platform to charge it. It is idempotent per
// order: a second call finds the first payment (unique key on order_no) and,
// while it still waits for payment, charges it again, which the platform
// answers with the same transaction because it keys charges by out_trade_no.
// created reports whether this call inserted the payment.
func (a *App) CreatePayment(ctx context.Context, orderNo string) (p payment.Payment, created bool, err error) {
	if a.orders == nil || a.platform == nil {
		return payment.Payment{}, false, errors.New("create payment: no order service or platform configured")
	}
	order, err := a.orders.Order(ctx, orderNo)
	if err != nil {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: %w", orderNo, err)
	}
	if order.Status != payment.OrderWaitPay {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s in status %s: %w", orderNo, order.Status, payment.ErrOrderNotPayable)
	}
	if order.Amount <= 0 {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s with amount %d: %w", orderNo, order.Amount, payment.ErrOrderNotPayable)
	}
	p, created, err = a.store.Create(ctx, payment.Payment{
		OutTradeNo: newOutTradeNo(a.now().Format("20060102150405")),
		OrderNo:    order.OrderNo,
		Amount:     order.Amount,
		Status:     payment.StatusWaitPay,
	})
	if err != nil {
		return payment.Payment{}, false, fmt.Errorf("create payment for order %s: %w", orderNo, err)
	}
	if p.Status != payment.StatusWaitPay {
		return p, created, nil
	}
	if _, err := a.platform.Charge(ctx, psp.ChargeRequest{OutTradeNo: p.OutTradeNo, Amount: p.Amount, NotifyURL: a.cfg.NotifyURL}); err != nil {
		// The payment stays WAIT_PAY; creating it again retries the charge.
		return p, created, fmt.Errorf("charge payment %s: %w", p.OutTradeNo, errors.Join(payment.ErrPlatformRejected, err))
	}
	a.log.InfoContext(ctx, "payment created", "out_trade_no", p.OutTradeNo, "order_no", p.OrderNo, "amount", p.Amount, "created", created)
	return p, created, nil
}

// newOutTradeNo returns "P", the creation time to the second and 8 random
// hex digits: unique, sortable and short enough for any platform.
func newOutTradeNo(stamp string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "P" + stamp + hex.EncodeToString(b[:])
}
