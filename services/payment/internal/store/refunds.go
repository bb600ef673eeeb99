package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// refundRow is the refund table.
type refundRow struct {
	ID            uint64 `gorm:"primaryKey"`
	RefundNo      string
	OutTradeNo    string
	OrderNo       string
	Amount        int64
	Status        string
	Channel       string
	RefundSerial  *string // NULL until the platform names it: the unique key allows many NULLs
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	SubmittedAt   *time.Time
	RefundedAt    *time.Time
}

func (refundRow) TableName() string { return "refund" }

// byRefundNo is the refund table for a conditional update of one refund,
// found by its unique number (database.ByKey), not by idx_refund_due.
func byRefundNo(db *gorm.DB) *gorm.DB {
	return database.ByKey(db, "refund", "uk_refund_no")
}

func toRefund(r refundRow) payment.Refund {
	out := payment.Refund{
		ID: r.ID, RefundNo: r.RefundNo, OutTradeNo: r.OutTradeNo, OrderNo: r.OrderNo, Amount: r.Amount,
		Status: payment.RefundStatus(r.Status), Channel: r.Channel, Attempts: r.Attempts,
		NextAttemptAt: r.NextAttemptAt, LastError: r.LastError, CreatedAt: r.CreatedAt,
		SubmittedAt: r.SubmittedAt, RefundedAt: r.RefundedAt,
	}
	if r.RefundSerial != nil {
		out.RefundSerial = *r.RefundSerial
	}
	return out
}

// maxErrorLen is the width of refund.last_error.
const maxErrorLen = 255

func (t *tx) InsertRefund(ctx context.Context, r payment.Refund) error {
	now := t.s.now()
	row := refundRow{
		RefundNo: r.RefundNo, OutTradeNo: r.OutTradeNo, OrderNo: r.OrderNo, Amount: r.Amount,
		Status: string(payment.RefundPending), Channel: r.Channel, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now,
	}
	err := quiet(t.db.WithContext(ctx)).Create(&row).Error
	if database.IsDuplicateKey(err) {
		return payment.ErrDuplicateRefund
	}
	if err != nil {
		return fmt.Errorf("insert refund %s: %w", r.RefundNo, err)
	}
	return nil
}

func (t *tx) MarkRefundDone(ctx context.Context, r payment.RefundResult) (bool, error) {
	at := r.RefundedAt.UTC()
	res := byRefundNo(t.db.WithContext(ctx)).
		Where("refund_no = ? AND status IN ?", r.RefundNo, []string{string(payment.RefundPending), string(payment.RefundSubmitted)}).
		Updates(map[string]any{"status": string(payment.RefundDone), "refund_serial": r.RefundSerial,
			"refunded_at": at, "last_error": "", "updated_at": t.s.now()})
	if database.IsDuplicateKey(res.Error) {
		// Another refund of ours already carries this platform serial: the
		// platform says two different refunds are one.
		return false, fmt.Errorf("refund %s: serial %s is recorded on another refund: %w", r.RefundNo, r.RefundSerial, payment.ErrConflict)
	}
	if res.Error != nil {
		return false, fmt.Errorf("mark refund %s refunded: %w", r.RefundNo, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (t *tx) GetRefund(ctx context.Context, refundNo string) (payment.Refund, error) {
	return getRefund(t.db.WithContext(ctx), refundNo)
}

// GetRefund returns the refund refundNo.
func (s *Store) GetRefund(ctx context.Context, refundNo string) (payment.Refund, error) {
	return getRefund(s.db.WithContext(ctx), refundNo)
}

func getRefund(db *gorm.DB, refundNo string) (payment.Refund, error) {
	var row refundRow
	err := db.Where("refund_no = ?", refundNo).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return payment.Refund{}, payment.ErrRefundNotFound
	}
	if err != nil {
		return payment.Refund{}, fmt.Errorf("read refund %s: %w", refundNo, err)
	}
	return toRefund(row), nil
}

// ClaimRefund claims one due refund with a lease, in a transaction that
// ends before the caller calls the platform: the row is locked (SKIP LOCKED,
// so concurrent claimers take other rows instead of waiting) only for the
// moment it takes to push next_attempt_at past the lease. A claimer that
// dies leaves the row to be claimed again once the lease has run out; one
// that is merely slow may see its refund sent twice, which the platform
// answers with the same refund, because the request is keyed by refund_no.
func (s *Store) ClaimRefund(ctx context.Context, now time.Time, lease time.Duration) (payment.Refund, bool, error) {
	var (
		row refundRow
		ok  bool
	)
	err := s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
		res := db.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).
			Where("status = ? AND next_attempt_at <= ?", string(payment.RefundPending), now).
			Order("next_attempt_at, id").Limit(1).Find(&row)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		upd := database.ByKey(db, "refund", "PRIMARY").Where("id = ? AND status = ?", row.ID, string(payment.RefundPending)).
			Updates(map[string]any{"next_attempt_at": now.Add(lease), "attempts": gorm.Expr("attempts + 1"), "updated_at": now})
		if upd.Error != nil {
			return upd.Error
		}
		if upd.RowsAffected != 1 {
			return fmt.Errorf("refund %s changed under its row lock", row.RefundNo)
		}
		row.Attempts++
		row.NextAttemptAt = now.Add(lease)
		ok = true
		return nil
	})
	if err != nil {
		return payment.Refund{}, false, fmt.Errorf("claim a refund: %w", err)
	}
	return toRefund(row), ok, nil
}

// RefundSubmitted settles a claimed refund the platform accepted.
func (s *Store) RefundSubmitted(ctx context.Context, refundNo, refundSerial string, at time.Time) (bool, error) {
	res := byRefundNo(s.db.WithContext(ctx)).
		Where("refund_no = ? AND status = ?", refundNo, string(payment.RefundPending)).
		Updates(map[string]any{"status": string(payment.RefundSubmitted), "refund_serial": refundSerial,
			"submitted_at": at.UTC(), "last_error": "", "updated_at": at.UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("mark refund %s submitted: %w", refundNo, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RefundFailed settles a claimed refund whose request failed: it stays
// PENDING, due again at next.
func (s *Store) RefundFailed(ctx context.Context, refundNo string, next time.Time, reason string) error {
	if len(reason) > maxErrorLen {
		reason = reason[:maxErrorLen]
	}
	err := byRefundNo(s.db.WithContext(ctx)).
		Where("refund_no = ? AND status = ?", refundNo, string(payment.RefundPending)).
		Updates(map[string]any{"next_attempt_at": next.UTC(), "last_error": reason, "updated_at": s.now()}).Error
	if err != nil {
		return fmt.Errorf("record the failure of refund %s: %w", refundNo, err)
	}
	return nil
}
