package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// HandlePaid applies a verified "paid" notification of the payment
// platform: the fix (handlePaidFixed), behind the entry lock when
// Config.CallbackLock is set, or the PaidHandler a lab substituted (Deps.Paid).
// Signature and timestamp are verified before this is called (httpapi).
func (a *App) HandlePaid(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
	return a.paid.HandlePaid(ctx, t)
}

// handlePaidFixed is the fix for incident 2, and the one path by which any
// platform payment is applied: a notification, an active query's answer, a
// close the platform answered "paid". The platform delivers a notification
// at least once and sometimes many times at once, and a query or a close
// may learn of the same payment at the same moment, so every step is
// written to make a repeat harmless:
//
//  1. The payment is looked up and the notified amount compared with ours; a
//     mismatch is refused and logged as an alert, nothing is written.
//  2. In ONE transaction: the platform transaction is inserted under the
//     unique key (channel, platform_serial), so a repeat fails here and is
//     answered as already processed; the payment moves WAIT_PAY → PAID by a
//     conditional update whose rows affected say whether this call made the
//     move; the payment.succeeded event goes to the outbox. Either all three
//     are committed or none is.
//  3. When the conditional update changes nothing, the payment is re-read:
//     paid by this very transaction is success; CLOSED means the customer
//     paid while the order closed (closeLatePayment: recorded and refunded,
//     never PAID); anything else (paid by another transaction) is a
//     conflict, refused and logged.
//
// Correctness depends only on the database: no lock is needed in front.
func (a *App) handlePaidFixed(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
	p, err := a.store.Get(ctx, t.OutTradeNo)
	if err != nil {
		return "", fmt.Errorf("handle notification %s: %w", t.PlatformSerial, err)
	}
	if t.Amount != p.Amount {
		a.log.ErrorContext(ctx, "payment notification amount mismatch", "alert", "payment_amount_mismatch",
			"out_trade_no", t.OutTradeNo, "platform_serial", t.PlatformSerial, "expected", p.Amount, "notified", t.Amount)
		return "", fmt.Errorf("handle notification %s: expected %d, notified %d: %w", t.PlatformSerial, p.Amount, t.Amount, payment.ErrAmountMismatch)
	}

	outcome := payment.Processed
	err = a.store.InTx(ctx, func(tx payment.Tx) error {
		if err := tx.InsertTransaction(ctx, t); err != nil {
			return err
		}
		moved, err := tx.MarkPaid(ctx, t)
		if err != nil {
			return err
		}
		if !moved {
			cur, err := tx.Get(ctx, t.OutTradeNo)
			if err != nil {
				return err
			}
			if cur.PaidBy(t.Channel, t.PlatformSerial) {
				return errAlreadyPaid
			}
			if cur.Status == payment.StatusClosed {
				outcome = payment.Refunding
				return closeLatePayment(ctx, tx, cur, t)
			}
			return fmt.Errorf("payment %s is %s by %s/%s: %w", cur.OutTradeNo, cur.Status, cur.Channel, cur.PlatformSerial, payment.ErrConflict)
		}
		// The message number is derived from the payment, so even a second
		// event for it would be dropped by the stream and the consumers.
		return tx.AddEvent(ctx, events.Event{
			ID:      "payment-succeeded-" + p.OutTradeNo,
			Subject: events.PaymentSucceeded,
			Payload: paymentSucceeded(p, t),
		})
	})
	switch {
	case err == nil && outcome == payment.Refunding:
		a.log.WarnContext(ctx, "payment arrived after its order closed: recorded, refund requested",
			"out_trade_no", t.OutTradeNo, "order_no", p.OrderNo, "platform_serial", t.PlatformSerial, "amount", t.Amount,
			"refund_no", payment.RefundNoFor(t.OutTradeNo))
		return payment.Refunding, nil
	case err == nil:
		a.log.InfoContext(ctx, "payment paid", "out_trade_no", t.OutTradeNo, "platform_serial", t.PlatformSerial, "amount", t.Amount)
		return payment.Processed, nil
	case errors.Is(err, payment.ErrDuplicateTxn), errors.Is(err, errAlreadyPaid):
		a.log.DebugContext(ctx, "duplicate payment notification", "out_trade_no", t.OutTradeNo, "platform_serial", t.PlatformSerial)
		return payment.Duplicate, nil
	case errors.Is(err, payment.ErrConflict):
		a.log.ErrorContext(ctx, "payment notification conflicts with the payment's state", "alert", "payment_conflict",
			"out_trade_no", t.OutTradeNo, "platform_serial", t.PlatformSerial, "err", err)
		return "", fmt.Errorf("handle notification %s: %w", t.PlatformSerial, err)
	default:
		return "", fmt.Errorf("handle notification %s: %w", t.PlatformSerial, err)
	}
}

// closeLatePayment applies, inside the notification's transaction (whose
// record insert has already passed the unique key), a payment that landed
// on a CLOSED payment: its order was closed while the customer paid. The
// payment moves CLOSED → REFUNDING with the transaction recorded on it, by
// a conditional update, and one refund row is written, its number derived
// from the payment and unique, for the payment-refund job to send. No
// payment.succeeded: the order stays closed, and the money goes back.
func closeLatePayment(ctx context.Context, tx payment.Tx, p payment.Payment, t payment.Transaction) error {
	moved, err := tx.MarkRefunding(ctx, t)
	if err != nil {
		return err
	}
	if !moved {
		return fmt.Errorf("closed payment %s changed while its late payment %s was applied: %w", p.OutTradeNo, t.PlatformSerial, payment.ErrConflict)
	}
	err = tx.InsertRefund(ctx, payment.Refund{
		RefundNo: payment.RefundNoFor(p.OutTradeNo), OutTradeNo: p.OutTradeNo, OrderNo: p.OrderNo,
		Amount: t.Amount, Channel: t.Channel,
	})
	if errors.Is(err, payment.ErrDuplicateRefund) {
		return fmt.Errorf("payment %s already has a refund: %w", p.OutTradeNo, payment.ErrConflict)
	}
	return err
}

// errAlreadyPaid rolls back a transaction whose notification turned out to
// be already applied, without treating it as a failure.
var errAlreadyPaid = errors.New("already paid by this transaction")

// paymentSucceeded is the payment.succeeded body for p paid by t.
func paymentSucceeded(p payment.Payment, t payment.Transaction) events.PaymentSucceededV1 {
	return events.PaymentSucceededV1{
		PaymentNo: p.OutTradeNo, OrderNo: p.OrderNo, Amount: t.Amount,
		Channel: t.Channel, PlatformSerial: t.PlatformSerial, PaidAt: t.PaidAt.UTC(),
	}
}
