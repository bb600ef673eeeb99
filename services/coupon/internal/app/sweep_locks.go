package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// SweepResult counts what one pass of the sweeper did.
type SweepResult struct {
	// Overdue is how many locks past their deadline it looked at.
	Overdue int
	// Abandoned is how many locks before their deadline it looked at
	// because an attempt of their order gave them back while another
	// attempt held them, and no attempt holds them any more.
	Abandoned int
	// Released: their order was not found or cancelled.
	Released int
	// Kept: their order is WAIT_PAY or PAID, an attempt of it holds the
	// lock again, or the lock was settled meanwhile.
	Kept int
	// Unreachable: the order service could not be asked about this lock's
	// order, which ended the pass; it and the locks after it wait for the
	// next pass.
	Unreachable int
	// BadAnswers: the order service answered something unusable about the
	// order; left for the next pass.
	BadAnswers int
}

// SweepLocks is one pass of the coupon-sweep job: it releases the locks
// whose order will never use them. A lock is a reservation taken before the
// order commits, so it outlives an order that never committed (its
// transaction failed after the lock, or its service crashed between the
// two) unless something gives it back; the order service releases it
// itself when it can, and this pass is for when it could not.
//
// It looks at two kinds of lock: those past their deadline
// (Store.OverdueLocks), and those given back by one attempt of their order
// while another held them, once no attempt holds them
// (Store.AbandonedLocks): a retry that failed within the lease of the try
// that crashed before it, whose coupon would otherwise wait out the lock
// TTL. For each, the order service is asked about the order: not found or
// CANCELLED releases the lock, in a transaction that first takes the
// coupon's row lock and finds no live hold of the order on it (an attempt
// that re-entered the lock meanwhile may still commit with it), then makes
// the conditional update LOCKED by that order -> UNUSED (a lock that
// order.cancelled or order.paid settled meanwhile is left alone); WAIT_PAY
// or PAID keeps it (the order can still be paid, or its order.paid is on
// the way to use it). When the order service cannot be reached the pass
// stops, since every remaining lock would wait out the same timeout, and
// returns an error wrapping coupon.ErrOrderServiceUnavailable: the locks
// wait for the next pass. An answer the sweeper cannot use about one order
// (a 404 that is not the order service's, an unknown status) keeps that
// lock and goes on.
func (a *App) SweepLocks(ctx context.Context) (SweepResult, error) {
	var r SweepResult
	now := a.now()
	for _, pass := range []struct {
		list func(ctx context.Context, now time.Time, afterID uint64, limit int) ([]coupon.Coupon, error)
		seen *int
	}{{a.store.OverdueLocks, &r.Overdue}, {a.store.AbandonedLocks, &r.Abandoned}} {
		var after uint64
		for {
			locks, err := pass.list(ctx, now, after, a.cfg.SweepBatch)
			if err != nil {
				return r, fmt.Errorf("sweep locks: %w", err)
			}
			for _, c := range locks {
				after = c.ID
				*pass.seen++
				if err := a.sweepLock(ctx, c, &r); err != nil {
					return r, fmt.Errorf("sweep locks: %w", err)
				}
			}
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			if len(locks) < a.cfg.SweepBatch {
				break
			}
		}
	}
	return r, nil
}

// sweepLock decides one lock. It returns an error only when the
// pass cannot go on: the order service cannot be reached, or the database
// fails; the lock is then left for the next pass.
func (a *App) sweepLock(ctx context.Context, c coupon.Coupon, r *SweepResult) error {
	state, err := a.orders.OrderState(ctx, c.LockedOrderNo)
	switch {
	case errors.Is(err, coupon.ErrOrderServiceUnavailable):
		r.Unreachable++
		a.metrics.sweepDecisions.WithLabelValues(sweepUnreachable).Inc()
		return err
	case err != nil:
		r.BadAnswers++
		a.metrics.sweepDecisions.WithLabelValues(sweepBadAnswer).Inc()
		a.log.WarnContext(ctx, "sweeper cannot tell what became of a lock's order, lock kept", "coupon_id", c.ID,
			"order_no", c.LockedOrderNo, "err", err)
		return nil
	case !state.ReleasesLock():
		r.Kept++
		a.metrics.sweepDecisions.WithLabelValues(sweepKept).Inc()
		a.log.InfoContext(ctx, "overdue lock kept: its order can still use it", "coupon_id", c.ID,
			"order_no", c.LockedOrderNo, "order_state", state, "locked_until", c.LockedUntil)
		return nil
	}
	var n int64
	if err := a.store.InTx(ctx, func(tx coupon.Tx) error {
		if _, err := tx.CouponForUpdate(ctx, c.ID); err != nil {
			return err
		}
		now := a.now()
		held, err := tx.LiveHolds(ctx, c.ID, c.LockedOrderNo, now)
		if err != nil || held > 0 {
			return err
		}
		n, err = tx.ReleaseLock(ctx, c.ID, c.LockedOrderNo, now)
		return err
	}); err != nil {
		return fmt.Errorf("release coupon %d of order %s: %w", c.ID, c.LockedOrderNo, err)
	}
	if n == 0 {
		r.Kept++
		a.metrics.sweepDecisions.WithLabelValues(sweepKept).Inc()
		a.log.InfoContext(ctx, "lock settled or held again while the sweeper asked, nothing to release", "coupon_id", c.ID,
			"order_no", c.LockedOrderNo)
		return nil
	}
	r.Released++
	a.metrics.sweepDecisions.WithLabelValues(sweepReleased).Inc()
	a.metrics.lockReleases.WithLabelValues(releasedBySweep).Inc()
	a.log.InfoContext(ctx, "coupon lock released", "coupon_id", c.ID, "order_no", c.LockedOrderNo, "by", releasedBySweep,
		"order_state", state, "locked_until", c.LockedUntil)
	return nil
}
