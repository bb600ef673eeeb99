package httpapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// errBusy answers a notification whose payment another request is
// processing right now: 503, so the platform retries it a moment later and
// then finds it a duplicate.
var errBusy = errors.New("a notification for this payment is being processed; retry later")

// locked puts the Redis entry lock in front of apply. A copy turned away by
// the lock is answered 200 when the payment is already paid by its platform
// transaction, 503 otherwise. It is an optimisation
// for storms (one copy reaches the database, the others are turned away in
// Redis), not a guard: apply is correct without it, and a Redis failure
// lets the notification through unlocked.
func (h *handlers) locked(apply applyFunc) applyFunc {
	return func(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
		lock, err := h.opts.Lock.Acquire(ctx, "payment:callback:"+t.OutTradeNo, h.opts.LockTTL)
		switch {
		case errors.Is(err, redislock.ErrNotAcquired):
			// A copy of a notification that already paid the payment is a
			// duplicate whoever holds the lock: answering it 200 now stops
			// the platform's retries instead of colliding with the next
			// copy's lock again and again.
			if p, gerr := h.opts.App.GetPayment(ctx, t.OutTradeNo); gerr == nil && p.PaidBy(t.Channel, t.PlatformSerial) {
				return payment.Duplicate, nil
			}
			return "", fmt.Errorf("notification %s: %w", t.PlatformSerial, errBusy)
		case err != nil:
			h.opts.Log.WarnContext(ctx, "callback entry lock unavailable; going on without it", "out_trade_no", t.OutTradeNo, "err", err)
			return apply(ctx, t)
		}
		defer func() {
			if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
				h.opts.Log.WarnContext(ctx, "callback entry lock release failed", "out_trade_no", t.OutTradeNo, "err", err)
			}
		}()
		return apply(ctx, t)
	}
}
