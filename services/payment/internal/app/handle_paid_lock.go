package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// ErrBusy answers a notification whose payment another copy is being
// applied for right now: the platform is to retry it a moment later (503),
// and then finds it a duplicate.
var ErrBusy = errors.New("a notification for this payment is being processed; retry later")

// locked puts the Redis entry lock on out_trade_no in front of apply (the
// fixed handler; the broken one never gets it, which would hide the
// incident). A copy turned away by the lock is answered as a duplicate when
// the payment is already paid by its platform transaction, ErrBusy
// otherwise. It is an optimisation for storms (one copy reaches the
// database, the others are turned away in Redis), not a guard: apply is
// correct without it, and a Redis failure lets the notification through
// unlocked.
func (a *App) locked(apply func(context.Context, payment.Transaction) (payment.Outcome, error)) func(context.Context, payment.Transaction) (payment.Outcome, error) {
	return func(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
		release, err := a.locks.Acquire(ctx, CallbackLockName(t.OutTradeNo), a.cfg.CallbackLockTTL)
		switch {
		case errors.Is(err, ErrLockHeld):
			// A copy of a notification that already paid the payment is a
			// duplicate whoever holds the lock: answering it 200 now stops
			// the platform's retries instead of colliding with the next
			// copy's lock again and again.
			if p, gerr := a.store.Get(ctx, t.OutTradeNo); gerr == nil && p.PaidBy(t.Channel, t.PlatformSerial) {
				return payment.Duplicate, nil
			}
			return "", fmt.Errorf("notification %s: %w", t.PlatformSerial, ErrBusy)
		case err != nil:
			a.log.WarnContext(ctx, "callback entry lock unavailable; going on without it", "out_trade_no", t.OutTradeNo, "err", err)
			return apply(ctx, t)
		}
		defer func() {
			if err := release(context.WithoutCancel(ctx)); err != nil {
				a.log.WarnContext(ctx, "callback entry lock release failed", "out_trade_no", t.OutTradeNo, "err", err)
			}
		}()
		return apply(ctx, t)
	}
}

// CallbackLockName is the name of the entry lock of outTradeNo's
// notifications, under the lock client's prefix.
func CallbackLockName(outTradeNo string) string { return "callback:" + outTradeNo }
