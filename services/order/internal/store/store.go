// Package store keeps orders in MySQL/MariaDB through gorm. It implements
// app.Store; the SQL that guards a transition (the conditional UPDATE) lives
// here, the decision about what a result means lives in app.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Store is the gorm implementation of app.Store.
type Store struct {
	db *gorm.DB
}

// New returns a Store over db.
func New(db *gorm.DB) *Store { return &Store{db: db} }

// Transaction runs fn in one transaction and commits it, reporting a failed
// commit; any error from fn rolls back.
func (s *Store) Transaction(ctx context.Context, fn func(tx *gorm.DB) error) error {
	// gorm's Transaction checks the Commit error and returns it.
	return s.db.WithContext(ctx).Transaction(fn)
}

// dbOrder is the orders row.
type dbOrder struct {
	ID        uint64 `gorm:"primaryKey"`
	OrderNo   string
	UserID    uint64
	Amount    int64
	CouponID  *uint64
	Status    string
	PaymentNo *string
	PaidAt    *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (dbOrder) TableName() string { return "orders" }

// dbItem is the order_items row.
type dbItem struct {
	ID        uint64 `gorm:"primaryKey"`
	OrderNo   string
	ProductID uint64
	Quantity  int
	UnitPrice int64
}

func (dbItem) TableName() string { return "order_items" }

func toDBOrder(o order.Order) dbOrder {
	d := dbOrder{OrderNo: o.No, UserID: o.UserID, Amount: o.Amount, CouponID: o.CouponID, Status: string(o.Status), PaidAt: o.PaidAt, CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC()}
	if o.PaymentNo != "" {
		d.PaymentNo = &o.PaymentNo
	}
	return d
}

func toOrder(d dbOrder, items []dbItem) order.Order {
	o := order.Order{No: d.OrderNo, UserID: d.UserID, Amount: d.Amount, CouponID: d.CouponID, Status: order.Status(d.Status), PaidAt: d.PaidAt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.PaymentNo != nil {
		o.PaymentNo = *d.PaymentNo
	}
	for _, it := range items {
		o.Items = append(o.Items, order.Item{ProductID: it.ProductID, Quantity: it.Quantity, UnitPrice: it.UnitPrice})
	}
	return o
}

// Insert writes o and its items in tx.
func (s *Store) Insert(tx *gorm.DB, o order.Order) error {
	row := toDBOrder(o)
	if err := tx.Create(&row).Error; err != nil {
		return fmt.Errorf("insert order %s: %w", o.No, err)
	}
	if len(o.Items) == 0 {
		return nil
	}
	items := make([]dbItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = dbItem{OrderNo: o.No, ProductID: it.ProductID, Quantity: it.Quantity, UnitPrice: it.UnitPrice}
	}
	if err := tx.Create(&items).Error; err != nil {
		return fmt.Errorf("insert items of order %s: %w", o.No, err)
	}
	return nil
}

// Get reads order no with its items through db (a transaction or the
// pool). forUpdate locks the order row until the transaction ends.
func (s *Store) Get(ctx context.Context, db *gorm.DB, no string, forUpdate bool) (order.Order, error) {
	if db == nil {
		db = s.db
	}
	q := db.WithContext(ctx)
	if forUpdate {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var row dbOrder
	if err := q.Where("order_no = ?", no).Take(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return order.Order{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
		}
		return order.Order{}, fmt.Errorf("read order %s: %w", no, err)
	}
	var items []dbItem
	if err := db.WithContext(ctx).Where("order_no = ?", no).Order("id").Find(&items).Error; err != nil {
		return order.Order{}, fmt.Errorf("read items of order %s: %w", no, err)
	}
	return toOrder(row, items), nil
}

// MarkPaid moves order no from WAIT_PAY to PAID by paymentNo with one
// conditional UPDATE and reports whether this call made the transition
// (rows affected = 1). False means the order was not WAIT_PAY any more, or
// does not exist; the caller re-reads to tell which.
func (s *Store) MarkPaid(tx *gorm.DB, no, paymentNo string, paidAt time.Time) (bool, error) {
	res := tx.Exec("UPDATE orders SET status = ?, payment_no = ?, paid_at = ?, updated_at = ? WHERE order_no = ? AND status = ?",
		order.StatusPaid, paymentNo, paidAt.UTC(), time.Now().UTC(), no, order.StatusWaitPay)
	if res.Error != nil {
		return false, fmt.Errorf("mark order %s paid: %w", no, res.Error)
	}
	switch res.RowsAffected {
	case 0:
		return false, nil
	case 1:
		return true, nil
	default:
		return false, fmt.Errorf("mark order %s paid: %d rows changed (order_no must be unique)", no, res.RowsAffected)
	}
}
