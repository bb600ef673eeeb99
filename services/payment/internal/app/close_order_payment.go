package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// CloseOrderPayment is what the order service asks before it closes an
// unpaid order (its cancel, its close job): make sure no payment can be made
// for the order any more, or say that one was. The answer is ClosePaid (the
// order is paid: it must not close) or CloseClosed (it may close):
//
//   - no payment yet: a CLOSED placeholder is inserted. The unique order_no
//     decides a race with POST /payments: either the placeholder is first and
//     the create finds it (409), or the create is first and this close finds
//     its payment below.
//   - WAIT_PAY: the platform closes the charge first. "closed", or a charge
//     the platform never saw, moves the payment WAIT_PAY → CLOSED by a
//     conditional update; "paid" applies the platform's transaction through
//     handlePaidFixed, the notification's path, so the notification that
//     follows is a duplicate. A platform that does not answer leaves the
//     payment as it was: ErrPlatformUnavailable, and the order stays open
//     until its next try.
//   - PAID: paid. CLOSED, REFUNDING, REFUNDED: closed (a payment that landed
//     after the close is refunded, the order stays closed).
//
// A close that loses its conditional update to a notification re-reads the
// payment and answers what it became, so the answer always matches the
// stored state. Calling it again answers the same.
func (a *App) CloseOrderPayment(ctx context.Context, orderNo string) (out payment.CloseOutcome, err error) {
	defer func() {
		label := string(out)
		if err != nil {
			label = "error"
		}
		a.m.closes.WithLabelValues(label).Inc()
	}()
	p, created, err := a.store.Create(ctx, payment.Payment{
		OutTradeNo: newOutTradeNo(a.now().Format("20060102150405")),
		OrderNo:    orderNo,
		Status:     payment.StatusClosed,
	})
	if err != nil {
		return "", fmt.Errorf("close order %s: %w", orderNo, err)
	}
	if created {
		a.log.InfoContext(ctx, "order closed before its payment: placeholder inserted", "order_no", orderNo, "out_trade_no", p.OutTradeNo)
		return payment.CloseClosed, nil
	}
	out, err = a.closePayment(ctx, p)
	if err != nil {
		return "", fmt.Errorf("close order %s: %w", orderNo, err)
	}
	a.log.InfoContext(ctx, "order's payment closed", "order_no", orderNo, "out_trade_no", p.OutTradeNo, "outcome", out)
	return out, nil
}

// closePayment closes the order's existing payment p.
func (a *App) closePayment(ctx context.Context, p payment.Payment) (payment.CloseOutcome, error) {
	switch {
	case p.Status == payment.StatusPaid:
		return payment.ClosePaid, nil
	case p.Closed():
		return payment.CloseClosed, nil
	case p.Status != payment.StatusWaitPay:
		return "", fmt.Errorf("payment %s in unknown status %s", p.OutTradeNo, p.Status)
	case a.platform == nil:
		return "", errNoPlatform
	}
	answer, err := a.platform.Close(ctx, p.OutTradeNo)
	switch {
	case errors.Is(err, psp.ErrUnknownCharge):
		// The platform never saw the charge (the create's charge call never
		// arrived): nothing was paid, the payment is closed.
	case err != nil:
		return "", fmt.Errorf("close the charge of payment %s: %w", p.OutTradeNo, platformErr(err))
	case answer.Status == psp.ClosePaid:
		if answer.PlatformSerial == "" || answer.PaidAt == nil {
			return "", fmt.Errorf("close the charge of payment %s: the platform answered paid without a transaction: %w", p.OutTradeNo, payment.ErrPlatformUnavailable)
		}
		outcome, err := a.handlePaidFixed(ctx, transactionOf(p.OutTradeNo, answer.Channel, answer.PlatformSerial, answer.Amount, *answer.PaidAt))
		if err != nil {
			return "", err
		}
		if outcome == payment.Refunding {
			// Another close won the race to CLOSED, and this payment is
			// now being given back: the order is closed.
			return payment.CloseClosed, nil
		}
		return payment.ClosePaid, nil
	}
	moved, err := a.store.MarkClosed(ctx, p.OutTradeNo)
	if err != nil {
		return "", err
	}
	if moved {
		return payment.CloseClosed, nil
	}
	// A notification (or another close) moved the payment between the
	// platform's answer and this update: answer what it became.
	cur, err := a.store.Get(ctx, p.OutTradeNo)
	if err != nil {
		return "", err
	}
	switch {
	case cur.Status == payment.StatusPaid:
		return payment.ClosePaid, nil
	case cur.Closed():
		return payment.CloseClosed, nil
	}
	return "", fmt.Errorf("payment %s is %s after its close", cur.OutTradeNo, cur.Status)
}

// transactionOf is a platform transaction learnt from an answer (a close,
// a query) rather than a notification, in the notification's shape. An
// answer that names no channel comes from the one platform this service
// talks to.
func transactionOf(outTradeNo, channel, serial string, amount int64, paidAt time.Time) payment.Transaction {
	if channel == "" {
		channel = psp.Channel
	}
	return payment.Transaction{Channel: channel, PlatformSerial: serial, OutTradeNo: outTradeNo, Amount: amount, PaidAt: paidAt.UTC()}
}
