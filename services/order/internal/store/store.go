// Package store keeps orders, their stock reservations and the product
// catalog in MySQL/MariaDB through gorm: Store implements order.Store and
// order.Tx, Products implements product.Store and product.Tx. The SQL that guards a change (a
// conditional UPDATE, a unique key, a locking read) lives here; what a
// result means is decided by the use cases in app.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Store is the gorm implementation of order.Store.
type Store struct {
	db   *gorm.DB
	send Send
}

var (
	_ order.Store = (*Store)(nil)
	_ order.Tx    = (*orderTx)(nil)
)

// New returns the orders' store over db; send (the outbox relay's Send)
// gets the events of every transaction that added some, once it committed.
func New(db *gorm.DB, send Send) *Store { return &Store{db: db, send: send} }

// InTx runs fn in one transaction (see order.Store).
func (s *Store) InTx(ctx context.Context, fn func(order.Tx) error) error {
	return inTx(ctx, s.db, s.send, func(t *txBase) error { return fn(&orderTx{t}) })
}

// InboxTx returns the order.Tx of tx, the transaction an inbox handler runs
// in (inbox.Handler): the inbox commits it, and the events it added are
// sent once it has.
func (s *Store) InboxTx(ctx context.Context, tx *gorm.DB) order.Tx {
	return &orderTx{inboxBase(ctx, tx, s.send)}
}

// CompleteInTx is idempotency.CompleteInTx for a transaction of this store:
// it completes the Idempotency-Key record of the request being served with
// its response, in the order's own transaction (see
// httpapi.Options.CompleteInTx). tx must come from Store.InTx.
func CompleteInTx(ctx context.Context, tx order.Tx, status int, body []byte) error {
	t, ok := tx.(*orderTx)
	if !ok {
		return fmt.Errorf("store: CompleteInTx needs a transaction of this store, got %T", tx)
	}
	return idempotency.CompleteInTx(ctx, t.db, status, body)
}

// orderTx is the gorm implementation of order.Tx.
type orderTx struct{ *txBase }

// dbOrder is the orders row.
type dbOrder struct {
	ID             uint64 `gorm:"primaryKey"`
	OrderNo        string
	UserID         uint64
	TotalAmount    int64
	DiscountAmount int64
	PayAmount      int64
	CouponID       *uint64
	Status         string
	PaymentNo      *string
	PaidAt         *time.Time
	CancelledAt    *time.Time
	CancelReason   *string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (dbOrder) TableName() string { return "orders" }

// dbOrderItems is an orders row with the count of its items.
type dbOrderItems struct {
	Order dbOrder `gorm:"embedded"`
	Items int
}

// dbItem is the order_items row.
type dbItem struct {
	ID        uint64 `gorm:"primaryKey"`
	OrderNo   string
	ProductID uint64
	Name      string
	Quantity  int
	UnitPrice int64
}

func (dbItem) TableName() string { return "order_items" }

func toDBOrder(o order.Order) dbOrder {
	return dbOrder{
		OrderNo: o.No, UserID: o.UserID, TotalAmount: o.TotalAmount, DiscountAmount: o.DiscountAmount, PayAmount: o.PayAmount,
		CouponID: o.CouponID, Status: string(o.Status), PaymentNo: nullString(o.PaymentNo), PaidAt: utc(o.PaidAt),
		CancelledAt: utc(o.CancelledAt), CancelReason: nullString(o.CancelReason), CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
}

func toOrder(d dbOrder, items []dbItem) order.Order {
	o := order.Order{
		No: d.OrderNo, UserID: d.UserID, TotalAmount: d.TotalAmount, DiscountAmount: d.DiscountAmount, PayAmount: d.PayAmount,
		CouponID: d.CouponID, Status: order.Status(d.Status), PaidAt: d.PaidAt, CancelledAt: d.CancelledAt,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
	}
	if d.PaymentNo != nil {
		o.PaymentNo = *d.PaymentNo
	}
	if d.CancelReason != nil {
		o.CancelReason = *d.CancelReason
	}
	for _, it := range items {
		o.Items = append(o.Items, order.Item{ProductID: it.ProductID, Name: it.Name, UnitPrice: it.UnitPrice, Quantity: it.Quantity})
	}
	return o
}

// nullString is s, or NULL when it is empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// utc is *t in UTC, or nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Insert writes o and its items. An order number already taken is
// order.ErrConflict: every try of one keyed request has one number, and a
// concurrent copy committed first.
func (t *orderTx) Insert(ctx context.Context, o order.Order) error {
	db := t.db.WithContext(ctx)
	row := toDBOrder(o)
	if err := db.Create(&row).Error; err != nil {
		if database.IsDuplicateKey(err) {
			return fmt.Errorf("%w: order %s exists already", order.ErrConflict, o.No)
		}
		return fmt.Errorf("insert order %s: %w", o.No, err)
	}
	if len(o.Items) == 0 {
		return nil
	}
	items := make([]dbItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = dbItem{OrderNo: o.No, ProductID: it.ProductID, Name: it.Name, Quantity: it.Quantity, UnitPrice: it.UnitPrice}
	}
	if err := db.Create(&items).Error; err != nil {
		return fmt.Errorf("insert items of order %s: %w", o.No, err)
	}
	return nil
}

// UpdateOrder reads order no under lock, applies fn and writes a changed
// status with a conditional UPDATE on the status it read (see order.Tx).
func (t *orderTx) UpdateOrder(ctx context.Context, no string, fn func(*order.Order) error) error {
	o, err := get(ctx, t.db, no, true)
	if err != nil {
		return err
	}
	return t.update(ctx, o, fn)
}

// UpdateOrderRow is UpdateOrder on the order's row alone, read under lock
// with the count of its items in one statement (see order.Tx). The lock
// is the row's: a subquery of a locking read locks nothing.
func (t *orderTx) UpdateOrderRow(ctx context.Context, no string, fn func(*order.Order) error) (int, error) {
	var row dbOrderItems
	res := t.db.WithContext(ctx).Raw(`SELECT o.*, (SELECT COUNT(*) FROM order_items i WHERE i.order_no = o.order_no) AS items
		FROM orders o FORCE INDEX (uk_orders_order_no) WHERE o.order_no = ? FOR UPDATE`, no).Scan(&row)
	switch {
	case res.Error != nil:
		return 0, fmt.Errorf("read order %s: %w", no, res.Error)
	case res.RowsAffected == 0:
		return 0, fmt.Errorf("%w: %s", order.ErrNotFound, no)
	}
	return row.Items, t.update(ctx, toOrder(row.Order, nil), fn)
}

// update applies fn to o, read under lock, and writes a changed status
// with a conditional UPDATE on the status it read.
func (t *orderTx) update(ctx context.Context, o order.Order, fn func(*order.Order) error) error {
	no, read := o.No, o.Status
	if err := fn(&o); err != nil {
		return err
	}
	if o.Status == read {
		return nil
	}
	// FORCE INDEX: the row is found by its unique number, never by a
	// status index (why: database.ByKey).
	res := t.db.WithContext(ctx).Exec(`UPDATE orders FORCE INDEX (uk_orders_order_no) SET status = ?, payment_no = ?, paid_at = ?, cancelled_at = ?, cancel_reason = ?, updated_at = ?
		WHERE order_no = ? AND status = ?`,
		o.Status, nullString(o.PaymentNo), utc(o.PaidAt), utc(o.CancelledAt), nullString(o.CancelReason), o.UpdatedAt.UTC(), no, read)
	if res.Error != nil {
		return fmt.Errorf("update order %s %s → %s: %w", no, read, o.Status, res.Error)
	}
	if res.RowsAffected != 1 {
		// The row is locked by this transaction, so anything but one row is
		// a broken assumption (a second row with this number, a lock not
		// taken), not a race to retry.
		return fmt.Errorf("update order %s %s → %s: %d rows changed, want 1", no, read, o.Status, res.RowsAffected)
	}
	return nil
}

// Get reads order no with its items.
func (s *Store) Get(ctx context.Context, no string) (order.Order, error) {
	return get(ctx, s.db, no, false)
}

// Head reads order no's row alone.
func (s *Store) Head(ctx context.Context, no string) (order.Order, error) {
	row, err := getRow(s.db.WithContext(ctx), no)
	if err != nil {
		return order.Order{}, err
	}
	return toOrder(row, nil), nil
}

// UserOrders pages through userID's orders newest first, by
// idx_orders_user (user_id, created_at, and the primary key after them),
// with the items of the page in one more read.
func (s *Store) UserOrders(ctx context.Context, userID uint64, before string, limit int) ([]order.Order, error) {
	db := s.db.WithContext(ctx)
	q := db.Where("user_id = ?", userID)
	if before != "" {
		cur, err := getRow(db, before)
		if err == nil && cur.UserID != userID {
			err = fmt.Errorf("%w: %s", order.ErrNotFound, before) // another user's: as if none
		}
		if err != nil {
			return nil, err
		}
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", cur.CreatedAt, cur.CreatedAt, cur.ID)
	}
	var rows []dbOrder
	if err := q.Order("created_at DESC, id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list orders of user %d: %w", userID, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	nos := make([]string, len(rows))
	for i, r := range rows {
		nos[i] = r.OrderNo
	}
	var items []dbItem
	if err := db.Where("order_no IN ?", nos).Order("id").Find(&items).Error; err != nil {
		return nil, fmt.Errorf("read items of user %d's orders: %w", userID, err)
	}
	byOrder := map[string][]dbItem{}
	for _, it := range items {
		byOrder[it.OrderNo] = append(byOrder[it.OrderNo], it)
	}
	out := make([]order.Order, len(rows))
	for i, r := range rows {
		out[i] = toOrder(r, byOrder[r.OrderNo])
	}
	return out, nil
}

// Expired lists WAIT_PAY orders created before before, oldest first, by
// idx_orders_status_created.
func (s *Store) Expired(ctx context.Context, before time.Time, limit int) ([]string, error) {
	var nos []string
	err := s.db.WithContext(ctx).Model(&dbOrder{}).
		Where("status = ? AND created_at < ?", string(order.StatusWaitPay), before.UTC()).
		Order("created_at, id").Limit(limit).Pluck("order_no", &nos).Error
	if err != nil {
		return nil, fmt.Errorf("list WAIT_PAY orders created before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return nos, nil
}

// get reads order no with its items through db (the pool or a
// transaction); lock takes the row lock until the transaction ends, which
// also reads the latest committed version.
func get(ctx context.Context, db *gorm.DB, no string, lock bool) (order.Order, error) {
	q := db.WithContext(ctx)
	if lock {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	row, err := getRow(q, no)
	if err != nil {
		return order.Order{}, err
	}
	var items []dbItem
	if err := db.WithContext(ctx).Where("order_no = ?", no).Order("id").Find(&items).Error; err != nil {
		return order.Order{}, fmt.Errorf("read items of order %s: %w", no, err)
	}
	return toOrder(row, items), nil
}

// getRow reads order no's row through q.
func getRow(q *gorm.DB, no string) (dbOrder, error) {
	var row dbOrder
	if err := q.Where("order_no = ?", no).Take(&row).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return dbOrder{}, fmt.Errorf("%w: %s", order.ErrNotFound, no)
		}
		return dbOrder{}, fmt.Errorf("read order %s: %w", no, err)
	}
	return row, nil
}
