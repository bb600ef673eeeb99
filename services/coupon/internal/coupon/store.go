package coupon

import (
	"context"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
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

	Message(ctx context.Context, id uint64) (Message, error)
	// ClaimDueMessages picks up to limit PENDING messages due at now that no
	// other replica is claiming (SKIP LOCKED) and pushes their next retry
	// time to now+lease, so each is processed by one replica at a time; a
	// replica that dies mid-way lets its claim lapse after lease.
	ClaimDueMessages(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]Message, error)
	// MarkMessage moves a PENDING message to status with the given retry
	// bookkeeping. It reports false when the message was no longer PENDING
	// (another attempt settled it), which is not an error.
	MarkMessage(ctx context.Context, id uint64, status MessageStatus, retryCount int, next time.Time, lastError string, now time.Time) (bool, error)

	// InTx runs fn in one database transaction, committed when fn returns
	// nil. A commit error is returned as is: the transaction may or may not
	// have committed (a lost COMMIT acknowledgement looks exactly like this).
	InTx(ctx context.Context, fn func(Tx) error) error

	Reconcile(ctx context.Context) ([]Anomaly, error)
	// ArchiveIdempotentRecords moves up to batch records whose expire_time is
	// before now to the archive table and reports how many moved.
	ArchiveIdempotentRecords(ctx context.Context, now time.Time, batch int) (int, error)
}

// Tx is what a use case does inside one transaction (Store.InTx, or the
// inbox consumer's transaction for a landing).
type Tx interface {
	// Template reads a template (templates never change once created).
	Template(ctx context.Context, id uint64) (Template, error)
	// CouponForUpdate reads the coupon with a row lock held to the end of
	// the transaction (a locking read sees the latest committed state).
	CouponForUpdate(ctx context.Context, id uint64) (Coupon, error)
	// UseCouponIfUnused is the state machine's conditional update
	// UNUSED -> USED; it returns the rows affected (0 or 1).
	UseCouponIfUnused(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error)
	// UseCouponUnconditionally sets USED whatever the current state. Only
	// the broken deduction calls it.
	UseCouponUnconditionally(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error)
	// InsertDeduction writes a ledger row. The schema keeps one row per
	// order: a second one returns ErrOrderAlreadyDeducted. (The lab runs
	// the broken deduction on the incident's schema, which has no such key;
	// there the second row goes in.)
	InsertDeduction(ctx context.Context, d *Deduction) error
	// SettleMessage moves a PENDING message to SUCCESS and returns the rows
	// affected (0 when it was no longer PENDING).
	SettleMessage(ctx context.Context, id uint64, now time.Time) (int64, error)
	// InsertIdempotentRecord inserts r and reports false, without error, if
	// its key already exists.
	InsertIdempotentRecord(ctx context.Context, r IdempotentRecord) (bool, error)
	// AddEvent queues e in the transaction (the outbox), so it is published
	// if and only if the transaction commits.
	AddEvent(ctx context.Context, e events.Event) error
	// InsertMessage lands a message; false, without error, when its
	// message id is already there.
	InsertMessage(ctx context.Context, m *Message) (bool, error)
}

// IdempotentRecord marks a stateless effect as done (seed 000, solution 2).
type IdempotentRecord struct {
	Key        string
	BizType    BizType
	BizNo      string
	CreatedAt  time.Time
	ExpireTime time.Time
}

// BizType says which kind of effect an IdempotentRecord guards.
type BizType uint8

// BizCouponUsedNotice guards the one "coupon used" notification per order.
const BizCouponUsedNotice BizType = 1

// NoticeKey is the idempotent key of the coupon used notification of an
// order: stable across retries and replicas, unlike a generated id.
func NoticeKey(orderNo string) string { return "coupon.used:" + orderNo }

// AnomalyKind names what the reconciler found.
type AnomalyKind string

// The invariants of incident 1, as the reconciler checks them.
const (
	AnomalyDuplicateDeduction AnomalyKind = "order_deducted_more_than_once"
	AnomalyUsedWithoutLedger  AnomalyKind = "used_coupon_without_deduction"
	AnomalyLedgerOnUnused     AnomalyKind = "deduction_on_unused_coupon"
)

// Anomaly is one broken invariant.
type Anomaly struct {
	Kind     AnomalyKind
	OrderNo  string
	CouponID uint64
	Count    int
}
