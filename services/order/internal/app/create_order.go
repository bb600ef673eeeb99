package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// CreateOrder is the input of the CreateOrder use case: who orders, what
// (products and quantities only; prices come from the catalog), and an
// optional coupon.
type CreateOrder struct {
	UserID   uint64
	Lines    []order.Line
	CouponID *uint64
	// IdempotencyKey is the request's Idempotency-Key, empty without one:
	// every try of one keyed request is placed under one order number
	// (KeyedOrderNumbers).
	IdempotencyKey string
}

// TxHook runs last inside CreateOrder's transaction, after the order and
// its event are written, with the order as created; an error rolls the whole
// transaction back. The HTTP handler uses it to build its response and
// complete the Idempotency-Key record atomically with the order.
type TxHook func(ctx context.Context, tx order.Tx, o order.Order) error

// releaseTimeout bounds the release of a coupon lock after an order failed;
// it runs on a context of its own, because the request's may be what ended.
const releaseTimeout = 5 * time.Second

// CreateOrder places an order:
//
//  1. validate cmd (order.ErrInvalid);
//  2. with a coupon: price the lines from the catalog
//     (order.ErrProductUnavailable for a product that does not exist or was
//     deleted) and lock the coupon at the coupon service for the order's
//     total (*order.CouponRefusedError; order.ErrUnavailable when it does
//     not answer). The lock is a network call, so it is made before the
//     transaction, never inside it;
//  3. in one transaction: read the prices under a shared lock (with a
//     coupon, re-read them: order.ErrPriceChanged if they moved since
//     step 2; without one this read prices the order, and the read of
//     step 2 is not needed), take the stock the way Config.Stock says
//     (order.ErrOutOfStock), insert the order with its items' snapshot
//     and its reservations, and run the hooks last.
//
// If anything after the lock fails (a refusal, an error, a panic), the lock
// is released before CreateOrder returns. If the process dies between the
// lock and the commit, nothing here can release it: a retry with the same
// Idempotency-Key finds the lock its own (one order number per key) and
// places the order; without a retry, the coupon service's lock deadline and
// its sweeper, which asks GET /internal/orders/{no}, release it. An order
// number already taken (a concurrent copy of the request committed first)
// is order.ErrConflict, and nothing is written.
// Every refusal leaves nothing of the order written.
func (a *App) CreateOrder(ctx context.Context, cmd CreateOrder, hooks ...TxHook) (o order.Order, err error) {
	switch {
	case cmd.UserID == 0:
		return order.Order{}, fmt.Errorf("%w: user id must be positive", order.ErrInvalid)
	case cmd.CouponID != nil && *cmd.CouponID == 0:
		return order.Order{}, fmt.Errorf("%w: coupon_id must be positive when given", order.ErrInvalid)
	}
	if err := order.CheckLines(cmd.Lines); err != nil {
		return order.Order{}, err
	}
	now := a.now()
	no, err := a.numbers.OrderNo(cmd.UserID, cmd.IdempotencyKey, now)
	if err != nil {
		return order.Order{}, err
	}

	// priced are the items as priced for the coupon lock; nil without a
	// coupon.
	var priced []order.Item
	var discount int64
	if cmd.CouponID != nil {
		// No := in this block: the deferred release below must see
		// CreateOrder's named result err, not a shadow of it.
		var catalog map[uint64]order.CatalogEntry
		if catalog, err = a.orders.Catalog(ctx, order.ProductIDs(cmd.Lines)); err != nil {
			return order.Order{}, fmt.Errorf("create order: %w", err)
		}
		if priced, err = order.Price(cmd.Lines, catalog); err != nil {
			return order.Order{}, err
		}
		var attempt string
		if attempt, err = newAttempt(); err != nil {
			return order.Order{}, err
		}
		var lock order.CouponLock
		if lock, err = a.lockCoupon(ctx, order.CouponLockRequest{CouponID: *cmd.CouponID, OrderNo: no, UserID: cmd.UserID, OrderAmount: order.Total(priced), Attempt: attempt}); err != nil {
			return order.Order{}, err
		}
		discount = lock.DiscountAmount
		defer func() {
			// Whatever made the order fail, or a panic on its way up,
			// releases the lock this order took.
			if p := recover(); p != nil {
				a.releaseCoupon(ctx, *cmd.CouponID, no, attempt, fmt.Errorf("panic: %v", p))
				panic(p)
			}
			if err != nil {
				a.releaseCoupon(ctx, *cmd.CouponID, no, attempt, err)
			}
		}()
	}

	err = a.inStockTx(ctx, func(tx order.Tx) error {
		catalog, err := tx.Catalog(ctx, order.ProductIDs(cmd.Lines))
		if err != nil {
			return err
		}
		items := priced
		if items == nil {
			items, err = order.Price(cmd.Lines, catalog)
		} else {
			err = order.CheckPrices(items, catalog)
		}
		if err != nil {
			return err
		}
		if o, err = order.New(no, cmd.UserID, items, cmd.CouponID, discount, now); err != nil {
			return err
		}
		return a.placeInTx(ctx, tx, o, hooks)
	})
	if err != nil {
		return order.Order{}, fmt.Errorf("create order: %w", err)
	}
	return o, nil
}

// placeInTx writes o, priced in tx: the order, its reservations and
// units, then the hooks. (No event: nothing needs to hear of an order
// until it is paid or cancelled.) The rows are inserted before any unit is
// taken: under REPEATABLE READ an insert may wait on the gap a cancel or a
// payment of a neighbouring order locks, and waiting there while holding a
// product's stock row, which that cancel needs next to give units back, was
// a deadlock. The pool's READ COMMITTED takes no such gap lock
// (TestPlacingAnOrderBesideACancelWaitsForNothing); the order keeps a pool
// opened some other way safe.
func (a *App) placeInTx(ctx context.Context, tx order.Tx, o order.Order, hooks []TxHook) error {
	lines := make([]order.Line, len(o.Items))
	for i, it := range o.Items {
		lines[i] = it.Line()
	}
	if err := tx.Insert(ctx, o); err != nil {
		return err
	}
	if err := a.reserveStock(ctx, tx, o.No, lines); err != nil {
		return err
	}
	for _, h := range hooks {
		if err := h(ctx, tx, o); err != nil {
			return err
		}
	}
	return nil
}

// lockCoupon locks the coupon of r at the coupon service and checks the
// answer against the contract. A lock call that got no usable answer may
// have locked the coupon all the same, or may still land, so it is released
// before the error is returned: the release frees a lock this order number
// holds, and the coupon service refuses this attempt's lock if it lands
// later.
func (a *App) lockCoupon(ctx context.Context, r order.CouponLockRequest) (order.CouponLock, error) {
	lock, err := a.coupons.Lock(ctx, r)
	var refused *order.CouponRefusedError
	switch {
	case errors.As(err, &refused):
		a.m.couponLocks.WithLabelValues("refused").Inc()
		a.log.InfoContext(ctx, "coupon refused for an order", "coupon_id", r.CouponID, "order_no", r.OrderNo, "user_id", r.UserID, "reason", refused.Reason)
		return order.CouponLock{}, err
	case err == nil && (lock.CouponID != r.CouponID || lock.OrderNo != r.OrderNo || lock.DiscountAmount < 0 || lock.DiscountAmount >= r.OrderAmount):
		err = fmt.Errorf("%w: coupon service locked coupon %d for order %q with a discount of %d on %d, asked for coupon %d, order %s",
			order.ErrUnavailable, lock.CouponID, lock.OrderNo, lock.DiscountAmount, r.OrderAmount, r.CouponID, r.OrderNo)
	}
	if err != nil {
		a.m.couponLocks.WithLabelValues("failed").Inc()
		a.releaseCoupon(ctx, r.CouponID, r.OrderNo, r.Attempt, err)
		return order.CouponLock{}, err
	}
	a.m.couponLocks.WithLabelValues("locked").Inc()
	return lock, nil
}

// releaseCoupon gives back the coupon lock of order orderNo after cause
// made the order fail. It first reads the order: a transaction whose
// COMMIT went through but whose acknowledgement was lost reports an error
// for an order that exists, and that order keeps its lock. The release is
// best effort: one that fails, or an order that cannot be read, is logged
// and left to the coupon service's sweeper, which frees the lock after its
// deadline when the order does not exist.
func (a *App) releaseCoupon(ctx context.Context, couponID uint64, orderNo, attempt string, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	switch _, err := a.orders.Head(ctx, orderNo); {
	case err == nil:
		a.m.couponReleases.WithLabelValues("kept").Inc()
		a.log.WarnContext(ctx, "order failed but committed (its commit acknowledgement was lost); its coupon stays locked",
			"coupon_id", couponID, "order_no", orderNo, "cause", cause)
		return
	case !errors.Is(err, order.ErrNotFound):
		a.m.couponReleases.WithLabelValues("failed").Inc()
		a.log.WarnContext(ctx, "cannot tell whether the failed order committed; its coupon lock is left to the coupon sweeper",
			"coupon_id", couponID, "order_no", orderNo, "cause", cause, "err", err)
		return
	}
	released, err := a.coupons.Release(ctx, couponID, orderNo, attempt)
	switch {
	case err != nil:
		a.m.couponReleases.WithLabelValues("failed").Inc()
		a.log.WarnContext(ctx, "coupon lock not released after the order failed; the coupon sweeper will release it",
			"coupon_id", couponID, "order_no", orderNo, "cause", cause, "err", err)
	case released:
		a.m.couponReleases.WithLabelValues("released").Inc()
		a.log.InfoContext(ctx, "coupon lock released after the order failed", "coupon_id", couponID, "order_no", orderNo, "cause", cause)
	default:
		a.m.couponReleases.WithLabelValues("not_held").Inc()
	}
}
