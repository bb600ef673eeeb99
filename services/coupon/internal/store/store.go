// Package store implements coupon.Store on MySQL/MariaDB through gorm.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Store is the MySQL coupon.Store.
type Store struct {
	db *gorm.DB
}

var _ coupon.Store = (*Store)(nil)

// New returns a Store over db.
func New(db *gorm.DB) *Store { return &Store{db: db} }

// CreateTemplate inserts t and sets its ID.
func (s *Store) CreateTemplate(ctx context.Context, t *coupon.Template) error {
	row := toDBTemplate(*t)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert template: %w", err)
	}
	t.ID = row.ID
	return nil
}

// Template returns the template id, or coupon.ErrNotFound.
func (s *Store) Template(ctx context.Context, id uint64) (coupon.Template, error) {
	var row templateRow
	if err := s.db.WithContext(ctx).Take(&row, id).Error; err != nil {
		return coupon.Template{}, notFound(err, "template %d", id)
	}
	return row.toDomain(), nil
}

// CreateCoupon inserts c and sets its ID.
func (s *Store) CreateCoupon(ctx context.Context, c *coupon.Coupon) error {
	row := toDBCoupon(*c)
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("insert coupon: %w", err)
	}
	c.ID = row.ID
	return nil
}

// Coupon returns the coupon id, or coupon.ErrNotFound.
func (s *Store) Coupon(ctx context.Context, id uint64) (coupon.Coupon, error) {
	var row couponRow
	if err := s.db.WithContext(ctx).Take(&row, id).Error; err != nil {
		return coupon.Coupon{}, notFound(err, "coupon %d", id)
	}
	return row.toDomain(), nil
}

// UserCoupons lists a user's coupons, newest first.
func (s *Store) UserCoupons(ctx context.Context, userID uint64) ([]coupon.Coupon, error) {
	var rows []couponRow
	if err := s.db.WithContext(ctx).Where("user_id = ?", userID).Order("id DESC").Limit(1000).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list coupons of user %d: %w", userID, err)
	}
	out := make([]coupon.Coupon, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// OverdueLocks implements coupon.Store.
func (s *Store) OverdueLocks(ctx context.Context, now time.Time, afterID uint64, limit int) ([]coupon.Coupon, error) {
	var rows []couponRow
	if err := s.db.WithContext(ctx).Where("status = ? AND locked_until < ? AND id > ?", string(coupon.StatusLocked), now, afterID).
		Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list overdue locks: %w", err)
	}
	out := make([]coupon.Coupon, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// abandonedLocksSQL finds AbandonedLocks from the release records, which
// are few (they last the lock TTL) and keyed by coupon first.
const abandonedLocksSQL = `SELECT DISTINCT c.* FROM coupon_lock_release r
JOIN coupons c ON c.id = r.coupon_id AND c.locked_order_no = r.order_no
WHERE r.coupon_id > ? AND c.status = ? AND c.locked_until >= ?
  AND NOT EXISTS (SELECT 1 FROM coupon_lock_hold h WHERE h.coupon_id = c.id AND h.order_no = c.locked_order_no AND h.expires_at > ?)
ORDER BY c.id LIMIT ?`

// AbandonedLocks implements coupon.Store.
func (s *Store) AbandonedLocks(ctx context.Context, now time.Time, afterID uint64, limit int) ([]coupon.Coupon, error) {
	var rows []couponRow
	if err := s.db.WithContext(ctx).Raw(abandonedLocksSQL, afterID, string(coupon.StatusLocked), now, now, limit).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list abandoned locks: %w", err)
	}
	out := make([]coupon.Coupon, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// Message returns the local message id, or coupon.ErrNotFound.
func (s *Store) Message(ctx context.Context, id uint64) (coupon.Message, error) {
	var row messageRow
	if err := s.db.WithContext(ctx).Take(&row, id).Error; err != nil {
		return coupon.Message{}, notFound(err, "message %d", id)
	}
	return row.toDomain(), nil
}

// readCommitted is the isolation of the queue-style transactions (claims and
// archive batches). Under MySQL's default REPEATABLE READ, a locking scan of
// the (status, next_retry_time) index also locks the gaps between rows; moving
// a claimed row's next_retry_time then inserts into a gap another claimer
// holds, and two claimers deadlock. READ COMMITTED takes record locks only,
// which is all SKIP LOCKED needs.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// queueTx runs fn in a READ COMMITTED transaction and runs it again, up to
// three times in all, when InnoDB picks it as a deadlock victim. The claim
// and archive transactions are safe to repeat (a rolled-back claim claimed
// nothing), and on a small table the optimizer may answer "WHERE id IN (…)"
// with a scan that waits on rows another claimer holds, so two claimers can
// deadlock even on disjoint rows.
func (s *Store) queueTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var err error
	for range 3 {
		err = s.db.WithContext(ctx).Transaction(fn, readCommitted)
		if !database.IsDeadlock(err) {
			return err
		}
	}
	return err
}

// ClaimDueMessages implements coupon.Store. The claim is a short transaction
// of its own: SELECT ... FOR UPDATE SKIP LOCKED keeps two replicas from
// picking the same rows at the same moment, and moving next_retry_time past
// the lease keeps them from picking the rows again while they are processed.
func (s *Store) ClaimDueMessages(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]coupon.Message, error) {
	var rows []messageRow
	err := s.queueTx(ctx, func(tx *gorm.DB) error {
		rows = nil
		err := tx.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).
			Where("status = ? AND next_retry_time <= ?", string(coupon.MessagePending), now).
			Order("next_retry_time, id").Limit(limit).Find(&rows).Error
		if err != nil || len(rows) == 0 {
			return err
		}
		ids := make([]uint64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		res := messageByID(tx).Where("id IN ? AND status = ?", ids, string(coupon.MessagePending)).
			Updates(map[string]any{"next_retry_time": now.Add(lease), "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		// The rows are locked by this transaction, so every one must have
		// been updated; anything else means the lock did not hold.
		if res.RowsAffected != int64(len(rows)) {
			return fmt.Errorf("claimed %d messages but extended %d leases", len(rows), res.RowsAffected)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim due messages: %w", err)
	}
	out := make([]coupon.Message, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// MarkMessage implements coupon.Store.
func (s *Store) MarkMessage(ctx context.Context, id uint64, status coupon.MessageStatus, retryCount int, next time.Time, lastError, reason string, now time.Time) (bool, error) {
	res := messageByID(s.db.WithContext(ctx)).
		Where("id = ? AND status = ?", id, string(coupon.MessagePending)).
		Updates(map[string]any{"status": string(status), "retry_count": retryCount, "next_retry_time": next,
			"last_error": lastError, "failure_reason": reason, "updated_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("mark message %d %s: %w", id, status, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// LockCoupon implements coupon.Store: Tx's conditional update, on the pool.
func (s *Store) LockCoupon(ctx context.Context, id uint64, orderNo string, until, now time.Time) (int64, error) {
	return s.autocommit().LockCoupon(ctx, id, orderNo, until, now)
}

// ReleaseLock implements coupon.Store: Tx's conditional update, on the pool.
func (s *Store) ReleaseLock(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error) {
	return s.autocommit().ReleaseLock(ctx, id, orderNo, now)
}

// ForgetReleases implements coupon.Store: one bounded DELETE in the order of
// the expiry index, so a large backlog is cleared in short statements.
func (s *Store) ForgetReleases(ctx context.Context, now time.Time, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec("DELETE FROM coupon_lock_release WHERE expires_at < ? ORDER BY expires_at LIMIT ?", now, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("forget lock releases: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// ForgetHolds implements coupon.Store as ForgetReleases does.
func (s *Store) ForgetHolds(ctx context.Context, now time.Time, limit int) (int64, error) {
	res := s.db.WithContext(ctx).Exec("DELETE FROM coupon_lock_hold WHERE expires_at < ? ORDER BY expires_at LIMIT ?", now, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("forget lock holds: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// autocommit returns a Tx whose statements run on the pool, each committing
// by itself. Only single-statement changes go through it.
func (s *Store) autocommit() *Tx { return &Tx{db: s.db} }

// InTx implements coupon.Store. gorm's Transaction returns the Commit error,
// which is the one that a lost COMMIT acknowledgement produces. After the
// commit it runs what the transaction registered with AfterCommit; after a
// rollback or a lost acknowledgement it runs none of it.
func (s *Store) InTx(ctx context.Context, fn func(coupon.Tx) error) error {
	var after []func()
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		after = nil
		return fn(&Tx{db: tx, onCommit: func(_ context.Context, f func()) { after = append(after, f) }})
	})
	if err == nil {
		for _, f := range after {
			f()
		}
	}
	return err
}

// reconcileLimit bounds the rows each reconciliation query returns: a
// report of a thousand findings of a kind is already an incident.
const reconcileLimit = 1000

// Reconcile implements coupon.Store with one query per invariant.
func (s *Store) Reconcile(ctx context.Context, overdueBefore time.Time) ([]coupon.Anomaly, error) {
	db := s.db.WithContext(ctx)
	out := []coupon.Anomaly{}

	var dups []struct {
		OrderNo string
		N       int
	}
	if err := db.Raw(`SELECT order_no, COUNT(*) AS n FROM coupon_deduction
		GROUP BY order_no HAVING COUNT(*) > 1 ORDER BY order_no LIMIT ?`, reconcileLimit).Scan(&dups).Error; err != nil {
		return nil, fmt.Errorf("reconcile duplicate deductions: %w", err)
	}
	for _, d := range dups {
		out = append(out, coupon.Anomaly{Kind: coupon.AnomalyDuplicateDeduction, OrderNo: d.OrderNo, Count: d.N})
	}

	var orphans []struct {
		ID          uint64
		UsedOrderNo *string
	}
	if err := db.Raw(`SELECT c.id, c.used_order_no FROM coupons c
		WHERE c.status = ? AND NOT EXISTS (SELECT 1 FROM coupon_deduction d WHERE d.coupon_id = c.id)
		ORDER BY c.id LIMIT ?`, string(coupon.StatusUsed), reconcileLimit).Scan(&orphans).Error; err != nil {
		return nil, fmt.Errorf("reconcile used coupons without deduction: %w", err)
	}
	for _, o := range orphans {
		a := coupon.Anomaly{Kind: coupon.AnomalyUsedWithoutLedger, CouponID: o.ID}
		if o.UsedOrderNo != nil {
			a.OrderNo = *o.UsedOrderNo
		}
		out = append(out, a)
	}

	var notUsed []struct {
		OrderNo  string
		CouponID uint64
		N        int
	}
	if err := db.Raw(`SELECT d.order_no, d.coupon_id, COUNT(*) AS n FROM coupon_deduction d
		JOIN coupons c ON c.id = d.coupon_id WHERE c.status <> ?
		GROUP BY d.order_no, d.coupon_id ORDER BY d.order_no LIMIT ?`, string(coupon.StatusUsed), reconcileLimit).Scan(&notUsed).Error; err != nil {
		return nil, fmt.Errorf("reconcile deductions on coupons not used: %w", err)
	}
	for _, u := range notUsed {
		out = append(out, coupon.Anomaly{Kind: coupon.AnomalyLedgerOnUnused, OrderNo: u.OrderNo, CouponID: u.CouponID, Count: u.N})
	}

	var unheld []struct {
		OrderNo       string
		CouponID      uint64
		FailureReason string
	}
	if err := db.Raw(`SELECT order_no, coupon_id, failure_reason FROM coupon_message
		WHERE status = ? AND failure_reason IN ? ORDER BY id LIMIT ?`,
		string(coupon.MessageFailed), coupon.PaidWithoutLockReasons(), reconcileLimit).Scan(&unheld).Error; err != nil {
		return nil, fmt.Errorf("reconcile paid orders without their coupon's lock: %w", err)
	}
	for _, u := range unheld {
		out = append(out, coupon.Anomaly{Kind: coupon.AnomalyPaidWithoutLock, OrderNo: u.OrderNo, CouponID: u.CouponID, Reason: u.FailureReason})
	}

	var overdue []couponRow
	if err := db.Where("status = ? AND locked_until < ?", string(coupon.StatusLocked), overdueBefore).
		Order("locked_until, id").Limit(reconcileLimit).Find(&overdue).Error; err != nil {
		return nil, fmt.Errorf("reconcile overdue locks: %w", err)
	}
	for _, r := range overdue {
		c := r.toDomain()
		out = append(out, coupon.Anomaly{Kind: coupon.AnomalyLockOverdue, OrderNo: c.LockedOrderNo, CouponID: c.ID, LockedUntil: c.LockedUntil})
	}
	return out, nil
}

// Tx is coupon.Tx on one gorm transaction.
type Tx struct {
	db *gorm.DB
	// onCommit arranges for fn to run once the transaction has committed,
	// by whoever commits it.
	onCommit func(ctx context.Context, fn func())
}

var _ coupon.Tx = (*Tx)(nil)

// InboxTx returns the coupon.Tx view of the inbox consumer's transaction,
// which the consumer commits: what is registered with AfterCommit (the
// relay's wake included) runs after that commit (inbox.OnCommit).
func (s *Store) InboxTx(_ context.Context, tx *gorm.DB) coupon.Tx {
	return &Tx{db: tx, onCommit: inbox.OnCommit}
}

// DB returns the transaction's handle, for SQL of the caller's own: the
// lab's broken variants run theirs on the transaction of the use case.
func (t *Tx) DB() *gorm.DB { return t.db }

// AfterCommit implements coupon.Tx.
func (t *Tx) AfterCommit(ctx context.Context, fn func()) { t.onCommit(ctx, fn) }

// CouponForUpdate implements coupon.Tx with SELECT ... FOR UPDATE.
func (t *Tx) CouponForUpdate(ctx context.Context, id uint64) (coupon.Coupon, error) {
	var row couponRow
	err := t.db.WithContext(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Take(&row, id).Error
	if err != nil {
		return coupon.Coupon{}, notFound(err, "coupon %d", id)
	}
	return row.toDomain(), nil
}

// LockCoupon implements coupon.Tx. The unique key on locked_order_no turns
// a second coupon for the same order into coupon.ErrNotAvailable; a
// duplicate key inside a MySQL transaction rolls back only the statement.
func (t *Tx) LockCoupon(ctx context.Context, id uint64, orderNo string, until, now time.Time) (int64, error) {
	res := couponByID(t.db.WithContext(ctx)).
		Where("id = ? AND status = ?", id, string(coupon.StatusUnused)).
		Updates(map[string]any{"status": string(coupon.StatusLocked), "locked_order_no": orderNo, "locked_until": until,
			"version": gorm.Expr("version + 1"), "updated_at": now})
	if res.Error != nil {
		if database.IsDuplicateKey(res.Error) {
			return 0, fmt.Errorf("%w: order %s already holds another coupon", coupon.ErrNotAvailable, orderNo)
		}
		return 0, fmt.Errorf("lock coupon %d: %w", id, res.Error)
	}
	return res.RowsAffected, nil
}

// ReleaseLock implements coupon.Tx.
func (t *Tx) ReleaseLock(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error) {
	res := couponByID(t.db.WithContext(ctx)).
		Where("id = ? AND status = ? AND locked_order_no = ?", id, string(coupon.StatusLocked), orderNo).
		Updates(map[string]any{"status": string(coupon.StatusUnused), "locked_order_no": nil, "locked_until": nil,
			"version": gorm.Expr("version + 1"), "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("release coupon %d of order %s: %w", id, orderNo, res.Error)
	}
	return res.RowsAffected, nil
}

// RecordRelease implements coupon.Tx with an insert that ignores the
// record already there.
func (t *Tx) RecordRelease(ctx context.Context, id uint64, orderNo, attempt string, now, expires time.Time) error {
	row := releaseRow{CouponID: id, OrderNo: orderNo, Attempt: attempt, ReleasedAt: now, ExpiresAt: expires}
	if err := t.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("record release of coupon %d by order %s: %w", id, orderNo, err)
	}
	return nil
}

// Released implements coupon.Tx.
func (t *Tx) Released(ctx context.Context, id uint64, orderNo, attempt string) (bool, error) {
	var n int64
	err := t.db.WithContext(ctx).Model(&releaseRow{}).
		Where("coupon_id = ? AND order_no = ? AND attempt = ?", id, orderNo, attempt).Count(&n).Error
	if err != nil {
		return false, fmt.Errorf("read release of coupon %d by order %s: %w", id, orderNo, err)
	}
	return n > 0, nil
}

// HoldLock implements coupon.Tx with an upsert: a hold already there gets
// the new expiry.
func (t *Tx) HoldLock(ctx context.Context, id uint64, orderNo, attempt string, now, expires time.Time) error {
	row := holdRow{CouponID: id, OrderNo: orderNo, Attempt: attempt, HeldAt: now, ExpiresAt: expires}
	err := t.db.WithContext(ctx).Clauses(clause.OnConflict{DoUpdates: clause.AssignmentColumns([]string{"held_at", "expires_at"})}).
		Create(&row).Error
	if err != nil {
		return fmt.Errorf("record hold of coupon %d by order %s: %w", id, orderNo, err)
	}
	return nil
}

// DropHold implements coupon.Tx.
func (t *Tx) DropHold(ctx context.Context, id uint64, orderNo, attempt string) error {
	err := t.db.WithContext(ctx).Where("coupon_id = ? AND order_no = ? AND attempt = ?", id, orderNo, attempt).
		Delete(&holdRow{}).Error
	if err != nil {
		return fmt.Errorf("drop hold of coupon %d by order %s: %w", id, orderNo, err)
	}
	return nil
}

// LiveHolds implements coupon.Tx.
func (t *Tx) LiveHolds(ctx context.Context, id uint64, orderNo string, now time.Time) (int64, error) {
	var n int64
	err := t.db.WithContext(ctx).Model(&holdRow{}).
		Where("coupon_id = ? AND order_no = ? AND expires_at > ?", id, orderNo, now).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count holds of coupon %d by order %s: %w", id, orderNo, err)
	}
	return n, nil
}

// UseLockedCoupon implements coupon.Tx.
func (t *Tx) UseLockedCoupon(ctx context.Context, id uint64, orderNo string, userID uint64, now time.Time) (int64, error) {
	res := couponByID(t.db.WithContext(ctx)).
		Where("id = ? AND status = ? AND locked_order_no = ? AND user_id = ?", id, string(coupon.StatusLocked), orderNo, userID).
		Updates(map[string]any{"status": string(coupon.StatusUsed), "used_order_no": orderNo,
			"version": gorm.Expr("version + 1"), "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("use coupon %d: %w", id, res.Error)
	}
	return res.RowsAffected, nil
}

// InsertDeduction implements coupon.Tx: the unique key on order_no turns a
// second row for the order into coupon.ErrOrderAlreadyDeducted.
func (t *Tx) InsertDeduction(ctx context.Context, d *coupon.Deduction) error {
	row := deductionRow{OrderNo: d.OrderNo, CouponID: d.CouponID, UserID: d.UserID, Amount: d.Amount,
		MessageID: d.MessageID, CreatedAt: d.CreatedAt}
	if err := t.db.WithContext(ctx).Create(&row).Error; err != nil {
		if database.IsDuplicateKey(err) {
			return fmt.Errorf("%w: order %s", coupon.ErrOrderAlreadyDeducted, d.OrderNo)
		}
		return fmt.Errorf("insert deduction for order %s: %w", d.OrderNo, err)
	}
	d.ID = row.ID
	return nil
}

// InsertDeductionOf implements coupon.Tx with INSERT … SELECT, the
// owner and the discount joined from coupons and coupon_template by the
// coupon's primary key. The table is quoted as gorm quotes it in
// InsertDeduction, so that every ledger insert reads "INSERT INTO
// `coupon_deduction`": the text the storefront's lab switch arms the fault
// proxy with (services/web/lab), a COMMIT of a deduction and no other.
func (t *Tx) InsertDeductionOf(ctx context.Context, id uint64, orderNo, messageID string, now time.Time) error {
	res := t.db.WithContext(ctx).Exec("INSERT INTO `coupon_deduction`"+` (order_no, coupon_id, user_id, amount, message_id, created_at)
		SELECT ?, c.id, c.user_id, t.discount_amount, ?, ? FROM coupons c JOIN coupon_template t ON t.id = c.template_id WHERE c.id = ?`,
		orderNo, messageID, now, id)
	switch {
	case database.IsDuplicateKey(res.Error):
		return fmt.Errorf("%w: order %s", coupon.ErrOrderAlreadyDeducted, orderNo)
	case res.Error != nil:
		return fmt.Errorf("insert deduction of coupon %d for order %s: %w", id, orderNo, res.Error)
	case res.RowsAffected != 1:
		return fmt.Errorf("insert deduction of coupon %d for order %s: %w", id, orderNo, coupon.ErrNotFound)
	}
	return nil
}

// SettleMessage implements coupon.Tx.
func (t *Tx) SettleMessage(ctx context.Context, id uint64, now time.Time) (int64, error) {
	res := messageByID(t.db.WithContext(ctx)).
		Where("id = ? AND status = ?", id, string(coupon.MessagePending)).
		Updates(map[string]any{"status": string(coupon.MessageSuccess), "last_error": "", "updated_at": now})
	if res.Error != nil {
		return 0, fmt.Errorf("settle message %d: %w", id, res.Error)
	}
	return res.RowsAffected, nil
}

// InsertMessage implements coupon.Tx.
func (t *Tx) InsertMessage(ctx context.Context, m *coupon.Message) (bool, error) {
	row := toDBMessage(*m)
	if err := t.db.WithContext(ctx).Create(&row).Error; err != nil {
		if database.IsDuplicateKey(err) {
			return false, nil
		}
		return false, fmt.Errorf("insert message %s: %w", m.MessageID, err)
	}
	m.ID = row.ID
	return true, nil
}

func notFound(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", what, coupon.ErrNotFound)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// DB returns the underlying handle, for tests and the lab that count rows.
func (s *Store) DB() *gorm.DB { return s.db }
