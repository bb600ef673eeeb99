package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// HandleRefunded applies a verified refund notification of the platform
// (signature and timestamp are checked by the edge, psp.VerifyRefund). The
// platform retries it until a 2xx, and may send copies at once, so it is
// written like the paid notification's handler:
//
//  1. The refund is looked up by its number and compared with the
//     notification (payment, amount, channel); an unknown refund is 404, a
//     mismatch is refused (422) and logged as an alert. Nothing is written.
//  2. In ONE transaction: the refund moves PENDING or SUBMITTED → REFUNDED by
//     a conditional update (the copies wait on its row lock, then change
//     nothing), the payment REFUNDING → REFUNDED likewise, and
//     payment.refunded goes to the outbox with a message number derived
//     from the refund number.
//  3. When the refund's update changes nothing, it is re-read: refunded by
//     this platform serial is a duplicate (200), anything else a conflict.
func (a *App) HandleRefunded(ctx context.Context, r payment.RefundResult) (payment.Outcome, error) {
	ref, err := a.store.GetRefund(ctx, r.RefundNo)
	if err != nil {
		return "", fmt.Errorf("handle refund notification %s: %w", r.RefundNo, err)
	}
	if ref.OutTradeNo != r.OutTradeNo || ref.Amount != r.Amount || ref.Channel != r.Channel {
		a.log.ErrorContext(ctx, "refund notification differs from the refund", "alert", "payment_refund_mismatch",
			"refund_no", r.RefundNo, "out_trade_no", ref.OutTradeNo, "notified_out_trade_no", r.OutTradeNo,
			"amount", ref.Amount, "notified_amount", r.Amount, "channel", ref.Channel, "notified_channel", r.Channel)
		return "", fmt.Errorf("handle refund notification %s: refund of %d on %s, notified %d on %s: %w",
			r.RefundNo, ref.Amount, ref.OutTradeNo, r.Amount, r.OutTradeNo, payment.ErrAmountMismatch)
	}
	err = a.store.InTx(ctx, func(tx payment.Tx) error {
		moved, err := tx.MarkRefundDone(ctx, r)
		if err != nil {
			return err
		}
		if !moved {
			cur, err := tx.GetRefund(ctx, r.RefundNo)
			if err != nil {
				return err
			}
			if cur.Status == payment.RefundDone && cur.RefundSerial == r.RefundSerial {
				return errAlreadyRefunded
			}
			return fmt.Errorf("refund %s is %s by %s: %w", cur.RefundNo, cur.Status, cur.RefundSerial, payment.ErrConflict)
		}
		moved, err = tx.MarkRefunded(ctx, ref.OutTradeNo, r.RefundedAt)
		if err != nil {
			return err
		}
		if !moved {
			p, err := tx.Get(ctx, ref.OutTradeNo)
			if err != nil {
				return err
			}
			return fmt.Errorf("refund %s settles payment %s, which is %s: %w", r.RefundNo, p.OutTradeNo, p.Status, payment.ErrConflict)
		}
		return tx.AddEvent(ctx, events.Event{
			ID:      "payment-refunded-" + r.RefundNo,
			Subject: events.PaymentRefunded,
			Payload: events.PaymentRefundedV1{PaymentNo: ref.OutTradeNo, OrderNo: ref.OrderNo, RefundNo: r.RefundNo,
				Amount: r.Amount, RefundedAt: r.RefundedAt.UTC()},
		})
	})
	switch {
	case err == nil:
		a.log.InfoContext(ctx, "payment refunded", "refund_no", r.RefundNo, "out_trade_no", r.OutTradeNo,
			"order_no", ref.OrderNo, "refund_serial", r.RefundSerial, "amount", r.Amount)
		return payment.Processed, nil
	case errors.Is(err, errAlreadyRefunded):
		a.log.DebugContext(ctx, "duplicate refund notification", "refund_no", r.RefundNo, "refund_serial", r.RefundSerial)
		return payment.Duplicate, nil
	case errors.Is(err, payment.ErrConflict):
		a.log.ErrorContext(ctx, "refund notification conflicts with the refund's state", "alert", "payment_refund_conflict",
			"refund_no", r.RefundNo, "refund_serial", r.RefundSerial, "err", err)
		return "", fmt.Errorf("handle refund notification %s: %w", r.RefundNo, err)
	default:
		return "", fmt.Errorf("handle refund notification %s: %w", r.RefundNo, err)
	}
}

// errAlreadyRefunded rolls back a transaction whose refund notification was
// already applied, without treating it as a failure.
var errAlreadyRefunded = errors.New("already refunded by this platform refund")
