package store

import (
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// The gorm models mirror the migrations; the schema itself lives in
// migrations/, never in AutoMigrate.

type templateRow struct {
	ID             uint64 `gorm:"primaryKey"`
	Name           string
	DiscountAmount int64
	MinOrderAmount int64
	ValidDays      int
	CreatedAt      time.Time
}

func (templateRow) TableName() string { return "coupon_template" }

func toDBTemplate(t coupon.Template) templateRow {
	return templateRow{ID: t.ID, Name: t.Name, DiscountAmount: t.DiscountAmount, MinOrderAmount: t.MinOrderAmount,
		ValidDays: t.ValidDays, CreatedAt: t.CreatedAt}
}

func (r templateRow) toDomain() coupon.Template {
	return coupon.Template{ID: r.ID, Name: r.Name, DiscountAmount: r.DiscountAmount, MinOrderAmount: r.MinOrderAmount,
		ValidDays: r.ValidDays, CreatedAt: r.CreatedAt}
}

type couponRow struct {
	ID            uint64 `gorm:"primaryKey"`
	TemplateID    uint64
	UserID        uint64
	Status        string
	LockedOrderNo *string
	LockedUntil   *time.Time
	UsedOrderNo   *string
	ExpiresAt     time.Time
	Version       uint32
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func (couponRow) TableName() string { return "coupons" }

func toDBCoupon(c coupon.Coupon) couponRow {
	r := couponRow{ID: c.ID, TemplateID: c.TemplateID, UserID: c.UserID, Status: string(c.Status),
		ExpiresAt: c.ExpiresAt, Version: c.Version, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	if c.LockedOrderNo != "" {
		r.LockedOrderNo = &c.LockedOrderNo
	}
	if !c.LockedUntil.IsZero() {
		r.LockedUntil = &c.LockedUntil
	}
	if c.UsedOrderNo != "" {
		r.UsedOrderNo = &c.UsedOrderNo
	}
	return r
}

func (r couponRow) toDomain() coupon.Coupon {
	c := coupon.Coupon{ID: r.ID, TemplateID: r.TemplateID, UserID: r.UserID, Status: coupon.Status(r.Status),
		ExpiresAt: r.ExpiresAt, Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.LockedOrderNo != nil {
		c.LockedOrderNo = *r.LockedOrderNo
	}
	if r.LockedUntil != nil {
		c.LockedUntil = *r.LockedUntil
	}
	if r.UsedOrderNo != nil {
		c.UsedOrderNo = *r.UsedOrderNo
	}
	return c
}

type deductionRow struct {
	ID        uint64 `gorm:"primaryKey"`
	OrderNo   string
	CouponID  uint64
	UserID    uint64
	Amount    int64
	MessageID string
	CreatedAt time.Time
}

func (deductionRow) TableName() string { return "coupon_deduction" }

// releaseRow is a record of coupon_lock_release (migration 000008).
type releaseRow struct {
	CouponID   uint64 `gorm:"primaryKey"`
	OrderNo    string `gorm:"primaryKey"`
	Attempt    string `gorm:"primaryKey"`
	ReleasedAt time.Time
	ExpiresAt  time.Time
}

func (releaseRow) TableName() string { return "coupon_lock_release" }

// holdRow is a record of coupon_lock_hold (migration 000009).
type holdRow struct {
	CouponID  uint64 `gorm:"primaryKey"`
	OrderNo   string `gorm:"primaryKey"`
	Attempt   string `gorm:"primaryKey"`
	HeldAt    time.Time
	ExpiresAt time.Time
}

func (holdRow) TableName() string { return "coupon_lock_hold" }

type messageRow struct {
	ID            uint64 `gorm:"primaryKey"`
	MessageID     string
	OrderNo       string
	UserID        uint64
	CouponID      uint64
	Status        string
	RetryCount    int
	NextRetryTime time.Time
	LastError     string
	FailureReason string
	TraceHeaders  string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func (messageRow) TableName() string { return "coupon_message" }

// toDBTrace encodes a message's trace headers as the trace_headers column
// holds them: JSON, or empty for none.
func toDBTrace(h map[string]string) string {
	if len(h) == 0 {
		return ""
	}
	raw, _ := json.Marshal(h) // a map of strings always encodes
	return string(raw)
}

// toDomainTrace decodes the trace_headers column. A value that does not
// decode loses the trace, never the message: the deduction starts a trace
// of its own.
func toDomainTrace(s string) map[string]string {
	var h map[string]string
	if s != "" && json.Unmarshal([]byte(s), &h) != nil {
		return nil
	}
	return h
}

func toDBMessage(m coupon.Message) messageRow {
	return messageRow{ID: m.ID, MessageID: m.MessageID, OrderNo: m.OrderNo, UserID: m.UserID, CouponID: m.CouponID,
		Status: string(m.Status), RetryCount: m.RetryCount, NextRetryTime: m.NextRetryAt, LastError: m.LastError,
		TraceHeaders: toDBTrace(m.Trace), CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

func (r messageRow) toDomain() coupon.Message {
	return coupon.Message{ID: r.ID, MessageID: r.MessageID, OrderNo: r.OrderNo, UserID: r.UserID, CouponID: r.CouponID,
		Status: coupon.MessageStatus(r.Status), RetryCount: r.RetryCount, NextRetryAt: r.NextRetryTime,
		LastError: r.LastError, Trace: toDomainTrace(r.TraceHeaders), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// couponByID and messageByID are the tables for a conditional update of
// rows found by id (database.ByKey): through the primary key, never through
// idx_coupons_lock_deadline or idx_coupon_message_due, both of which start
// with status and which MariaDB's plan prefers on a small table.
func couponByID(db *gorm.DB) *gorm.DB  { return database.ByKey(db, "coupons", "PRIMARY") }
func messageByID(db *gorm.DB) *gorm.DB { return database.ByKey(db, "coupon_message", "PRIMARY") }
