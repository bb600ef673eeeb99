package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/psp"
)

// RefundReport is what one SendRefunds run did.
type RefundReport struct {
	Sent   int // refund requests the platform accepted
	Failed int // refund requests that failed, to be retried
}

// SendRefunds sends the PENDING refunds to the platform, up to
// Config.RefundBatch, one at a time: claim (a short transaction that hides
// the refund from other replicas for Config.RefundLease), call the platform
// with no transaction open, settle (SUBMITTED with the platform's refund
// serial, or a failed attempt retried after a backoff doubling from
// Config.RefundBackoff to Config.RefundBackoffMax). The request is keyed by
// the refund number, so a claim that outlived its lease and is sent again
// gets the same refund back, never a second one. The platform's refund
// notification, not this job, makes the refund REFUNDED
// (HandleRefunded); it may arrive before the settle, which then changes
// nothing.
func (a *App) SendRefunds(ctx context.Context) (RefundReport, error) {
	var rep RefundReport
	if a.platform == nil {
		return rep, fmt.Errorf("send refunds: %w", errNoPlatform)
	}
	for range a.cfg.RefundBatch {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		r, ok, err := a.store.ClaimRefund(ctx, a.now(), a.cfg.RefundLease)
		if err != nil {
			return rep, fmt.Errorf("send refunds: %w", err)
		}
		if !ok {
			break
		}
		resp, err := a.platform.Refund(ctx, psp.RefundRequest{
			RefundNo: r.RefundNo, OutTradeNo: r.OutTradeNo, Amount: r.Amount, NotifyURL: a.cfg.RefundNotifyURL,
		})
		if err != nil {
			rep.Failed++
			a.m.refunds.WithLabelValues("failed").Inc()
			next := a.now().Add(a.refundBackoff(r.Attempts))
			attrs := []any{"refund_no", r.RefundNo, "out_trade_no", r.OutTradeNo, "attempts", r.Attempts, "next_attempt_at", next, "err", err}
			if errors.Is(err, psp.ErrRefused) {
				// A refusal will not change by itself: a person must look.
				a.log.ErrorContext(ctx, "platform refused a refund", append(attrs, "alert", "payment_refund_refused")...)
			} else {
				a.log.WarnContext(ctx, "refund request failed; retried later", attrs...)
			}
			if err := a.store.RefundFailed(ctx, r.RefundNo, next, err.Error()); err != nil {
				return rep, fmt.Errorf("send refunds: %w", err)
			}
			continue
		}
		moved, err := a.store.RefundSubmitted(ctx, r.RefundNo, resp.RefundSerial, a.now())
		if err != nil {
			return rep, fmt.Errorf("send refunds: %w", err)
		}
		rep.Sent++
		a.m.refunds.WithLabelValues("accepted").Inc()
		a.log.InfoContext(ctx, "refund requested", "refund_no", r.RefundNo, "out_trade_no", r.OutTradeNo,
			"refund_serial", resp.RefundSerial, "amount", r.Amount, "settled_by_notification_first", !moved)
	}
	return rep, nil
}

// refundBackoff is the wait after a refund's attempts-th failed request.
func (a *App) refundBackoff(attempts int) time.Duration {
	d := a.cfg.RefundBackoff
	for i := 1; i < attempts && d < a.cfg.RefundBackoffMax; i++ {
		d *= 2
	}
	return min(d, a.cfg.RefundBackoffMax)
}
