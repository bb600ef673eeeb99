package app

import (
	"context"
	"fmt"
	"time"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// FixedDeducer is the fix of incident 1 (the lost COMMIT acknowledgement): the
// state check, the conditional state change LOCKED -> USED by the order that
// holds the lock, the ledger row and the message status all happen in ONE
// transaction. Whatever the network does to the COMMIT reply, the database
// holds either all of them or none:
//
//   - If the reply is lost, the message is already SUCCESS in the database and
//     no pass of the retry job picks it up again.
//   - If a retry runs anyway (a stale claim, a second replica, a duplicate
//     event for the same order), the locking read sees the coupon USED by
//     this order and the attempt succeeds without a second effect.
//   - Concurrent attempts queue on the coupon's row lock; the first deducts,
//     the others then read USED-by-this-order.
//   - A coupon USED by another order, or not locked by this order (UNUSED,
//     or LOCKED by another), is a permanent refusal: the message goes to
//     FAILED with the reason, the reconciler lists the paid order, and the
//     other order's lock or deduction is untouched.
//
// Behind the state machine, the conditional update's rows affected are
// checked and the ledger's unique key on order_no refuses a second row, so a
// mistake in the check above still cannot write a second deduction.
// The incident's deduction, side by side: services/coupon/lab/deduct_broken.go.
// Walkthrough: docs/incidents/ (incident 1); proof: services/coupon/lab.
type FixedDeducer struct{}

// Mode implements CouponDeducer.
func (FixedDeducer) Mode() variant.Mode { return variant.Fixed }

// Deduct implements CouponDeducer.
func (FixedDeducer) Deduct(ctx context.Context, env DeductEnv, m coupon.Message) (Outcome, error) {
	out := Deducted
	err := env.Store.InTx(ctx, func(tx coupon.Tx) error {
		now := env.Now()
		c, err := tx.CouponForUpdate(ctx, m.CouponID)
		if err != nil {
			return err
		}
		decision, err := c.DecideDeduction(m.OrderNo, m.UserID)
		if err != nil {
			return err
		}
		if decision == coupon.AlreadyDone {
			out = Absorbed
			// Zero rows is fine here: a concurrent attempt that deducted
			// has settled the message already.
			_, err := tx.SettleMessage(ctx, m.ID, now)
			return err
		}
		n, err := tx.UseLockedCoupon(ctx, c.ID, m.OrderNo, m.UserID, now)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("coupon %d for order %s: %w", c.ID, m.OrderNo, coupon.ErrConcurrentChange)
		}
		t, err := env.Template(ctx, c.TemplateID)
		if err != nil {
			return err
		}
		d := coupon.Deduction{OrderNo: m.OrderNo, CouponID: c.ID, UserID: c.UserID, Amount: t.DiscountAmount,
			MessageID: m.MessageID, CreatedAt: now}
		if err := tx.InsertDeduction(ctx, &d); err != nil {
			return err
		}
		n, err = tx.SettleMessage(ctx, m.ID, now)
		if err != nil {
			return err
		}
		if n != 1 {
			// The message was failed or settled by someone else while this
			// attempt deducted: roll the deduction back rather than leave
			// an effect the message table does not account for.
			return fmt.Errorf("message %s is no longer pending", m.MessageID)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("deduct coupon %d for order %s: %w", m.CouponID, m.OrderNo, err)
	}
	return out, nil
}

// DeductOnDelivery is the fixed deduction made in tx, the transaction that
// lands m: the inbox's, which holds the delivery's processed-message row.
// The conditional update LOCKED by m's order -> USED, the ledger row and m
// itself, SUCCESS, commit together with that row or not at all, so a paid
// order's coupon costs one commit, and a lost COMMIT acknowledgement leaves
// nothing to retry: the redelivery it brings is a duplicate to the inbox.
//
// It reports false, having written nothing, when the update changes no
// row: the coupon is not LOCKED by m's order of m's user. Whether it is
// used by that order already or not the order's to use is Deduct's
// locking read to tell, so the caller lands m PENDING for an attempt.
func (FixedDeducer) DeductOnDelivery(ctx context.Context, tx coupon.Tx, m coupon.Message, now time.Time) (bool, error) {
	n, err := tx.UseLockedCoupon(ctx, m.CouponID, m.OrderNo, m.UserID, now)
	if err != nil || n == 0 {
		return false, err
	}
	if err := tx.InsertDeductionOf(ctx, m.CouponID, m.OrderNo, m.MessageID, now); err != nil {
		return false, err
	}
	m.Status = coupon.MessageSuccess
	inserted, err := tx.InsertMessage(ctx, &m)
	if err != nil {
		return false, err
	}
	if !inserted {
		// m's id was landed before by another way than this delivery (the
		// inbox would have dropped a duplicate) and is still the retry
		// pass's to deduct: undo this deduction with the delivery. Its
		// redelivery finds the coupon used and the id landed.
		return false, fmt.Errorf("order.paid %s for order %s was landed before and not deducted yet", m.MessageID, m.OrderNo)
	}
	return true, nil
}
