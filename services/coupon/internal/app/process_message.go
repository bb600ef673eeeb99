package app

import (
	"context"
	"errors"
	"fmt"

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

// ProcessMessage makes one attempt at deducting m's coupon with the
// configured deduction, then does the message bookkeeping of a failed
// attempt: a permanent refusal fails the message at once with its reason, a
// transient error schedules a retry with backoff, and the retry limit fails
// it. The returned error is the attempt's error, for the caller to log.
func (a *App) ProcessMessage(ctx context.Context, m coupon.Message) (Outcome, error) {
	var out Outcome
	var err error
	if a.cfg.Deduction == variant.Broken {
		out, err = a.deductBroken(ctx, m)
	} else {
		out, err = a.deductFixed(ctx, m)
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
