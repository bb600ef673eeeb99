package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Outcome is what one attempt at a message did.
type Outcome string

// Outcomes of ProcessMessage.
const (
	// Deducted: the coupon was deducted and the ledger row written.
	Deducted Outcome = "deducted"
	// Absorbed: the coupon was already used by this order; nothing changed.
	Absorbed Outcome = "absorbed"
	// Retry: a transient error; the message stays PENDING for a later try.
	Retry Outcome = "retry"
	// Failed: the message is FAILED, with the reason in last_error.
	Failed Outcome = "failed"
)

// CouponDeducer is incident 1's choice: how one attempt deducts a landed
// message's coupon. The service's is FixedDeducer (deduct_fixed.go); the
// incident's, side by side with it, is services/coupon/lab's
// deduct_broken.go, plugged in only in lab mode.
type CouponDeducer interface {
	// Mode names the deduction in coupon_deductions_total{mode}.
	Mode() variant.Mode
	// Deduct makes one attempt at m with env. Deducted means the
	// deduction committed: it is counted even when an error reports that
	// something after it failed. Absorbed means the coupon was already
	// used by m's order. An error is the attempt's, recorded on the
	// message by ProcessMessage.
	Deduct(ctx context.Context, env DeductEnv, m coupon.Message) (Outcome, error)
}

// DeliveryDeducer is a CouponDeducer that may deduct in the delivery's own
// transaction (FixedDeducer.DeductOnDelivery; a lab's switch while it runs
// the fix). False, having written nothing, lands the message PENDING for an
// attempt.
type DeliveryDeducer interface {
	CouponDeducer
	DeductOnDelivery(ctx context.Context, tx coupon.Tx, m coupon.Message, now time.Time) (bool, error)
}

// DeductEnv is what a CouponDeducer works with: the app's store, clock and
// template cache.
type DeductEnv struct {
	Store    coupon.Store
	Now      func() time.Time
	Template func(ctx context.Context, id uint64) (coupon.Template, error)
}

// ProcessMessage makes one attempt at deducting m's coupon with the
// configured deducer, then does the message bookkeeping of a failed
// attempt: a permanent refusal fails the message at once with its reason, a
// transient error schedules a retry with backoff, and the retry limit fails
// it. The returned error is the attempt's error, for the caller to log.
func (a *App) ProcessMessage(ctx context.Context, m coupon.Message) (Outcome, error) {
	out, err := a.deducer.Deduct(ctx, DeductEnv{Store: a.store, Now: a.now, Template: a.Template}, m)
	switch out {
	case Deducted:
		a.metrics.deductions.WithLabelValues(string(a.deducer.Mode())).Inc()
	case Absorbed:
		a.metrics.duplicatesAbsorbed.Inc()
		a.log.InfoContext(ctx, "coupon already used by this order, nothing to do", "order_no", m.OrderNo,
			"coupon_id", m.CouponID, "message_id", m.MessageID)
	}
	if err == nil {
		return out, nil
	}
	return a.afterFailedAttempt(ctx, m, err)
}

// afterFailedAttempt records a failed attempt on a message that is still
// PENDING. If the message is no longer PENDING the attempt's error was not
// what it seemed: the fixed deduction's transaction committed SUCCESS
// together with the effect and only the COMMIT acknowledgement was lost, or
// another attempt settled it meanwhile. Either way there is nothing to
// record, and the next pass will not pick the message again.
func (a *App) afterFailedAttempt(ctx context.Context, m coupon.Message, cause error) (Outcome, error) {
	now := a.now()
	attempts := m.RetryCount + 1
	status, next := a.cfg.Retry.AfterFailure(attempts, now)
	if coupon.IsPermanent(cause) {
		status, next = coupon.MessageFailed, now
	}
	reason := ""
	if status == coupon.MessageFailed {
		reason = coupon.FailureReason(cause)
	}
	changed, err := a.store.MarkMessage(ctx, m.ID, status, attempts, next, coupon.TruncateError(cause), reason, now)
	if err != nil {
		return Retry, errors.Join(cause, fmt.Errorf("record failed attempt: %w", err))
	}
	if !changed {
		a.log.InfoContext(ctx, "attempt failed on a message already settled", "message_id", m.MessageID,
			"order_no", m.OrderNo, "err", cause)
		return Retry, cause
	}
	if status == coupon.MessageFailed {
		a.metrics.messagesFailed.WithLabelValues(reason).Inc()
		return Failed, cause
	}
	a.metrics.messageRetries.Inc()
	return Retry, cause
}
