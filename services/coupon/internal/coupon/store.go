package coupon

import (
	"context"
	"time"
)

// Store is the persistence the coupon domain needs. Reads outside a
// transaction see the latest committed state at the time of the read and
// nothing more: a decision taken on them can be stale by the time it acts.
type Store interface {
	CreateTemplate(ctx context.Context, t *Template) error
	Template(ctx context.Context, id uint64) (Template, error)
	CreateCoupon(ctx context.Context, c *Coupon) error
	Coupon(ctx context.Context, id uint64) (Coupon, error)
	UserCoupons(ctx context.Context, userID uint64) ([]Coupon, error)
	// OverdueLocks returns up to limit LOCKED coupons whose deadline is
	// before now, with an id above afterID, in id order: the sweeper pages
	// through them all, so locks it keeps cannot hide the ones behind.
	OverdueLocks(ctx context.Context, now time.Time, afterID uint64, limit int) ([]Coupon, error)
	// AbandonedLocks returns up to limit LOCKED coupons, id above afterID,
	// in id order, whose deadline has not passed but whose lock an attempt
	// of its order gave back (a release record) while another attempt held
	// it, and which no attempt holds at now any more: the attempts that
	// held it died, and only the order service can tell whether one of
	// them committed its order.
	AbandonedLocks(ctx context.Context, now time.Time, afterID uint64, limit int) ([]Coupon, error)

	Message(ctx context.Context, id uint64) (Message, error)
	// ClaimDueMessages picks up to limit PENDING messages due at now that no
	// other replica is claiming (SKIP LOCKED) and pushes their next retry
	// time to now+lease, so each is processed by one replica at a time; a
	// replica that dies mid-way lets its claim lapse after lease.
	ClaimDueMessages(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Message, error)
	// MarkMessage moves a PENDING message to status with the given retry
	// bookkeeping (reason is the FailureReason label of a FAILED message,
	// empty otherwise). It reports false when the message was no longer
	// PENDING (another attempt settled it), which is not an error.
	MarkMessage(ctx context.Context, id uint64, status MessageStatus, retryCount int, next time.Time, lastError, reason string, now time.Time) (bool, error)

	// LockCoupon and ReleaseLock are Tx's conditional updates of the same
	// names, each sent alone as one statement that commits by itself: a
	// lock or a release changes one row, and a transaction around it would
	// only add two round trips.
	LockCoupon(ctx context.Context, id uint64, orderNo string, until, now time.Time) (int64, error)
	ReleaseLock(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error)

	// ForgetReleases deletes up to limit release records (Tx.RecordRelease)
	// that expired before now and returns how many it deleted.
	ForgetReleases(ctx context.Context, now time.Time, limit int) (int64, error)
	// ForgetHolds deletes up to limit holds (Tx.HoldLock) that expired
	// before now and returns how many it deleted.
	ForgetHolds(ctx context.Context, now time.Time, limit int) (int64, error)

	// InTx runs fn in one database transaction, committed when fn returns
	// nil. A commit error is returned as is: the transaction may or may not
	// have committed (a lost COMMIT acknowledgement looks exactly like this).
	InTx(ctx context.Context, fn func(Tx) error) error

	// Reconcile lists the broken invariants (see AnomalyKind); a LOCKED
	// coupon whose deadline is before overdueBefore is reported as stuck.
	Reconcile(ctx context.Context, overdueBefore time.Time) ([]Anomaly, error)
}

// Tx is what a use case does inside one transaction (Store.InTx, or the
// inbox consumer's transaction for a landing).
type Tx interface {
	// CouponForUpdate reads the coupon with a row lock held to the end of
	// the transaction (a locking read sees the latest committed state).
	CouponForUpdate(ctx context.Context, id uint64) (Coupon, error)
	// LockCoupon is the state machine's conditional update UNUSED ->
	// LOCKED by orderNo until until; it returns the rows affected (0 or 1).
	// An order holds one coupon at most: a second lock by the same order
	// returns ErrNotAvailable.
	LockCoupon(ctx context.Context, id uint64, orderNo string, until, now time.Time) (int64, error)
	// ReleaseLock is the conditional update LOCKED by orderNo -> UNUSED;
	// it returns the rows affected (0 when the coupon is not locked by
	// that order: released already, used, or locked by another).
	ReleaseLock(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error)
	// RecordRelease records that attempt of order orderNo released its
	// lock on coupon id, until expires; recording it again changes nothing.
	RecordRelease(ctx context.Context, id uint64, orderNo, attempt string, now, expires time.Time) error
	// Released reports whether attempt of order orderNo released its lock
	// on coupon id (a record RecordRelease wrote, not yet forgotten).
	Released(ctx context.Context, id uint64, orderNo, attempt string) (bool, error)
	// HoldLock records that attempt of order orderNo holds its order's lock
	// on coupon id until expires; holding it again moves expires.
	HoldLock(ctx context.Context, id uint64, orderNo, attempt string, now, expires time.Time) error
	// DropHold deletes attempt's hold on coupon id, if it has one.
	DropHold(ctx context.Context, id uint64, orderNo, attempt string) error
	// LiveHolds counts the holds of order orderNo on coupon id that expire
	// after now.
	LiveHolds(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error)
	// UseLockedCoupon is the deduction's conditional update LOCKED by
	// orderNo -> USED by orderNo, of userID's coupon; it returns the rows
	// affected (0 or 1).
	UseLockedCoupon(ctx context.Context, id uint64, orderNo string, userID uint64, now time.Time) (int64, error)
	// InsertDeduction writes a ledger row. The schema keeps one row per
	// order: a second one returns ErrOrderAlreadyDeducted. (The lab runs
	// the broken deduction on the incident's schema, which has no such key;
	// there the second row goes in.)
	InsertDeduction(ctx context.Context, d *Deduction) error
	// InsertDeductionOf writes InsertDeduction's row for orderNo with
	// coupon id's owner and its template's discount, which the insert
	// reads itself: a deduction that has not read the coupon needs no read
	// for its ledger row. ErrNotFound when there is no such coupon.
	InsertDeductionOf(ctx context.Context, id uint64, orderNo, messageID string, now time.Time) error
	// SettleMessage moves a PENDING message to SUCCESS and returns the rows
	// affected (0 when it was no longer PENDING).
	SettleMessage(ctx context.Context, id uint64, now time.Time) (int64, error)
	// AfterCommit runs fn once the transaction has committed, and never if
	// it rolls back: where a use case counts or logs an effect that must
	// not be counted when the transaction that made it is undone.
	AfterCommit(ctx context.Context, fn func())
	// InsertMessage lands a message; false, without error, when its
	// message id is already there.
	InsertMessage(ctx context.Context, m *Message) (bool, error)
}

// AnomalyKind names what the reconciler found.
type AnomalyKind string

// The invariants the reconciler checks: those of incident 1's deduction
// (one ledger row per order, a USED coupon with its ledger row and a ledger
// row with its USED coupon) and those of the locks (a paid order held its
// coupon's lock; a lock is settled soon after its deadline).
const (
	AnomalyDuplicateDeduction AnomalyKind = "order_deducted_more_than_once"
	AnomalyUsedWithoutLedger  AnomalyKind = "used_coupon_without_deduction"
	// AnomalyLedgerOnUnused is a ledger row whose coupon is not USED
	// (UNUSED, or LOCKED again).
	AnomalyLedgerOnUnused AnomalyKind = "deduction_on_unused_coupon"
	// AnomalyPaidWithoutLock is a paid order whose coupon it did not hold:
	// its order.paid message FAILED as not locked by the order, used by
	// another order, or another user's coupon. The order was discounted
	// and the coupon was not used for it.
	AnomalyPaidWithoutLock AnomalyKind = "paid_order_coupon_not_locked"
	// AnomalyLockOverdue is a coupon still LOCKED long after its deadline:
	// the sweeper, the order close job or the deduction is stuck.
	AnomalyLockOverdue AnomalyKind = "lock_overdue"
)

// AnomalyKinds lists every kind, for the findings gauge to start at zero.
var AnomalyKinds = []AnomalyKind{AnomalyDuplicateDeduction, AnomalyUsedWithoutLedger, AnomalyLedgerOnUnused,
	AnomalyPaidWithoutLock, AnomalyLockOverdue}

// PaidWithoutLockReasons are the failure reasons of a message whose paid
// order did not hold the coupon (AnomalyPaidWithoutLock).
func PaidWithoutLockReasons() []string {
	return []string{FailureReason(ErrNotLockedByOrder), FailureReason(ErrUsedByAnotherOrder), FailureReason(ErrWrongOwner)}
}

// Anomaly is one broken invariant.
type Anomaly struct {
	Kind     AnomalyKind
	OrderNo  string
	CouponID uint64
	Count    int
	// Reason is the failure reason of a paid order's message
	// (AnomalyPaidWithoutLock).
	Reason string
	// LockedUntil is the deadline of an overdue lock (AnomalyLockOverdue).
	LockedUntil time.Time
}
