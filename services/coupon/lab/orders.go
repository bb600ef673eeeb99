package lab

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// RivalOrders is how many orders of one user compete for the one coupon in
// the orders scenarios.
const RivalOrders = 20

// ConcurrentOrders isolates the broken deduction's first flaw, the state
// check outside the transaction. The coupon is locked by the first of n
// different orders of its owner, and each of the n has its own order.paid
// message for the same coupon; they are deducted at once. The order service
// never sends order.paid for an order that did not lock the coupon, but the
// deduction must not count on its producers: these are the paid events of
// orders whose lock was lost, replayed, or never taken. The second flaw (a
// coupon USED by the same order is let through) cannot play a part, since
// no order is attempted twice; only orders that read the coupon not yet
// USED before another one's deduction committed can deduct. So more than
// one ledger row for the coupon is the race, and SequentialOrders, the same
// orders one after another, is the control that shows it.
//
// The fixed deduction reads the coupon with FOR UPDATE inside its
// transaction: the order holding the lock deducts, and the n-1 others read
// it LOCKED by another order or USED by it, and fail their message with the
// reason (the reconciler lists them as paid orders without the lock).
func ConcurrentOrders(ctx context.Context, env lab.Env, mode variant.Mode, n int) (lab.Result, error) {
	f, msgs, err := setupRivalOrders(ctx, env, "i1_race_"+string(mode), mode, n)
	if err != nil {
		return lab.Result{}, err
	}
	defer f.Close()

	env.Note("racing %d orders of user %d for coupon %d", n, f.Coupon.UserID, f.Coupon.ID)
	processAtOnce(ctx, env, f.App, msgs, "order")
	env.Timeline.MarkDuplicates(1)
	return settleRivalOrders(ctx, env, f, msgs, mode, "concurrent-orders",
		fmt.Sprintf("%d orders racing for one coupon", n))
}

// SequentialOrders deducts the same n orders as ConcurrentOrders, one after
// another. Even the broken deduction then writes one ledger row: the first
// order (the lock's holder) deducts, and each later one reads the coupon
// USED by another order and fails. It is the control of ConcurrentOrders:
// the same code and orders, without the race, hold the invariant.
func SequentialOrders(ctx context.Context, env lab.Env, mode variant.Mode, n int) (lab.Result, error) {
	f, msgs, err := setupRivalOrders(ctx, env, "i1_serial_"+string(mode), mode, n)
	if err != nil {
		return lab.Result{}, err
	}
	defer f.Close()

	env.Note("deducting %d orders of user %d for coupon %d one after another", n, f.Coupon.UserID, f.Coupon.ID)
	for i, m := range msgs {
		start := time.Now()
		out, err := f.App.ProcessMessage(ctx, m)
		recordAttempt(env.Timeline, fmt.Sprintf("order %02d", i+1), out, err, start)
	}
	env.Timeline.MarkDuplicates(1)
	return settleRivalOrders(ctx, env, f, msgs, mode, "sequential-orders",
		fmt.Sprintf("the same %d orders one after another (control)", n))
}

// setupRivalOrders builds the fixture and lands n order.paid messages, for n
// different orders of the coupon's owner, that all use the one coupon.
func setupRivalOrders(ctx context.Context, env lab.Env, suffix string, mode variant.Mode, n int) (*Fixture, []coupon.Message, error) {
	env.MySQL.MaxOpenConns = max(env.MySQL.MaxOpenConns, n)
	env.MySQL.MaxIdleConns = max(env.MySQL.MaxIdleConns, n)
	f, err := Setup(ctx, env, suffix, mode)
	if err != nil {
		return nil, nil, err
	}
	msgs := []coupon.Message{f.Message}
	for i := 2; i <= n; i++ {
		orderNo := fmt.Sprintf("%s-%02d", f.Message.OrderNo, i)
		m, err := Land(ctx, f.App, f.Store, "msg-"+orderNo, orderNo, f.Coupon.UserID, f.Coupon.ID)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	if err := warmPool(ctx, f.DB, n); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, msgs, nil
}

// warmPool opens n connections at once and returns them to the pool idle.
// On a cold pool the first contender of a race, on the one connection
// setup left open, runs its whole deduction while the others are still
// dialling, and there is no race to see; a service under load has its
// connections open already.
func warmPool(ctx context.Context, db *gorm.DB, n int) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := sqlDB.Conn(ctx)
		if err != nil {
			return fmt.Errorf("warm the connection pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// settleRivalOrders lets the retry job finish any attempt that failed
// transiently, checks every order's bookkeeping and counts the coupon's
// ledger rows. Whatever the mode, each message must end either SUCCESS with
// one ledger row for its order, or FAILED with none, as used by another
// order or (the fixed deduction, reading the coupon still locked by its
// holder) as not locked by this order: anything else is an error of the
// scenario, not a verdict.
func settleRivalOrders(ctx context.Context, env lab.Env, f *Fixture, msgs []coupon.Message, mode variant.Mode, sub, injected string) (lab.Result, error) {
	if err := drainRetries(ctx, env, f.App); err != nil {
		return lab.Result{}, err
	}
	var deducted, refused int
	for _, m := range msgs {
		got, err := f.Store.Message(ctx, m.ID)
		if err != nil {
			return lab.Result{}, err
		}
		rows, err := CountDeductions(ctx, f.DB, m.OrderNo)
		if err != nil {
			return lab.Result{}, err
		}
		switch {
		case got.Status == coupon.MessageSuccess && rows == 1:
			deducted++
		case got.Status == coupon.MessageFailed && rows == 0 &&
			(strings.Contains(got.LastError, coupon.ErrUsedByAnotherOrder.Error()) ||
				strings.Contains(got.LastError, coupon.ErrNotLockedByOrder.Error())):
			refused++
		default:
			return lab.Result{}, fmt.Errorf("order %s: message %s with %d ledger rows (last error %q), "+
				"want SUCCESS with 1 row or FAILED as used by another order or not locked by it, with none",
				m.OrderNo, got.Status, rows, got.LastError)
		}
	}
	env.Note("orders that deducted the coupon: %d; failed as used by another order or not locked by it: %d", deducted, refused)
	var n int64
	if err := f.DB.WithContext(ctx).Table("coupon_deduction").Where("coupon_id = ?", f.Coupon.ID).Count(&n).Error; err != nil {
		return lab.Result{}, err
	}
	r := result(mode, sub, injected, int(n))
	r.Effect = "coupon_deduction rows of the one coupon"
	return r, nil
}
