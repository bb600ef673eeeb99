package lab

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// BrokenDeducer is the deduction of incident 1 AS IT WAS: kept to reproduce
// the incident in the lab and in the tests, plugged in by
// COUPON_DEDUCTION_MODE=broken in lab mode only. Do not copy it.
// app.FixedDeducer, in services/coupon/internal/app/deduct_fixed.go, is the
// fix.
// Walkthrough: docs/incidents/ (incident 1, the lost commit ACK).
//
// It breaks in three places, marked BROKEN below:
//
//  1. The state check runs outside the transaction, on a plain read. Two
//     retries (or two orders) running at once both read the coupon not yet
//     USED (LOCKED, since the order locked it) and both deduct: the row lock
//     only serialises the two UPDATEs, it does not re-run the check.
//  2. The check lets a coupon that is USED by this same order through: the
//     message is still PENDING, and the code takes that as proof that the
//     earlier attempt rolled back, because it got an error. A lost COMMIT
//     acknowledgement is exactly the case where the earlier attempt returned
//     an error AND committed; the retry then deducts a second time. The
//     check is the one the code had before coupons were locked: it refuses
//     only "USED by another order" and never asks which order holds the
//     lock.
//  3. The message status is updated in a separate statement after the
//     deduction committed. When the COMMIT reply is lost (or this second
//     statement fails), the effect is durable but the message stays PENDING,
//     so the retry job runs the whole deduction again.
//
// It reproduces the incident on the incident's schema, whose ledger has no
// per-order unique key, so nothing in the database stops the second row: the
// lab runs it there (services/coupon/lab/migrations drops the key). On this
// service's own schema the key refuses the second row, and the retry after a
// lost COMMIT acknowledgement fails the message as "order already deducted"
// although its deduction committed: a unique key alone tells "refused", not
// "done by me".
type BrokenDeducer struct{}

// Mode implements app.CouponDeducer.
func (BrokenDeducer) Mode() variant.Mode { return variant.Broken }

// Deduct implements app.CouponDeducer.
func (BrokenDeducer) Deduct(ctx context.Context, env app.DeductEnv, m coupon.Message) (app.Outcome, error) {
	// BROKEN (1): a plain read outside any transaction; by the time the
	// transaction below runs, another attempt may have deducted.
	c, err := env.Store.Coupon(ctx, m.CouponID)
	if err != nil {
		return "", fmt.Errorf("deduct coupon %d for order %s: %w", m.CouponID, m.OrderNo, err)
	}
	if c.UserID != m.UserID {
		return "", fmt.Errorf("deduct coupon %d for order %s: %w", c.ID, m.OrderNo, coupon.ErrWrongOwner)
	}
	// BROKEN (2): only "used by ANOTHER order" is refused; "used by this
	// order" is taken for the trace of an attempt that failed.
	if c.Status == coupon.StatusUsed && c.UsedOrderNo != m.OrderNo {
		return "", fmt.Errorf("deduct coupon %d for order %s: %w: used by order %s", c.ID, m.OrderNo,
			coupon.ErrUsedByAnotherOrder, c.UsedOrderNo)
	}

	err = env.Store.InTx(ctx, func(tx coupon.Tx) error {
		now := env.Now()
		// BROKEN (1, continued): no status or lock holder in the WHERE
		// clause, so this "succeeds" on a coupon another attempt has just
		// used.
		if err := useUnconditionally(ctx, tx, c.ID, m.OrderNo, now); err != nil {
			return err
		}
		t, err := env.Template(ctx, c.TemplateID)
		if err != nil {
			return err
		}
		d := coupon.Deduction{OrderNo: m.OrderNo, CouponID: c.ID, UserID: c.UserID, Amount: t.DiscountAmount,
			MessageID: m.MessageID, CreatedAt: now}
		return tx.InsertDeduction(ctx, &d)
	})
	if err != nil {
		// A lost COMMIT acknowledgement lands here although the deduction
		// is in the database; the caller leaves the message PENDING.
		return "", fmt.Errorf("deduct coupon %d for order %s: %w", c.ID, m.OrderNo, err)
	}

	// BROKEN (3): the message status is not part of the deduction's
	// transaction.
	if _, err := env.Store.MarkMessage(ctx, m.ID, coupon.MessageSuccess, m.RetryCount, env.Now(), "", "", env.Now()); err != nil {
		return app.Deducted, fmt.Errorf("mark message %s done: %w", m.MessageID, err) // the deduction committed
	}
	return app.Deducted, nil
}

// gormTx is the store's transaction as the lab sees it: the handle its own
// SQL runs on (internal/store's Tx).
type gormTx interface{ DB() *gorm.DB }

// useUnconditionally sets the coupon USED by orderNo whatever its state:
// no status or lock holder in the WHERE clause, so it "succeeds" on a
// coupon that is already USED, or locked by another order. The service
// has no such statement; the lab runs it on the deduction's transaction.
func useUnconditionally(ctx context.Context, tx coupon.Tx, id uint64, orderNo string, now time.Time) error {
	g, ok := tx.(gormTx)
	if !ok {
		return fmt.Errorf("use coupon %d: the store's transaction %T has no database handle", id, tx)
	}
	err := g.DB().WithContext(ctx).Table("coupons").Where("id = ?", id).
		Updates(map[string]any{"status": string(coupon.StatusUsed), "used_order_no": orderNo,
			"version": gorm.Expr("version + 1"), "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("use coupon %d: %w", id, err)
	}
	return nil
}
