// Package store implements payment.Store on MySQL/MariaDB with gorm.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Store is the gorm implementation of payment.Store.
type Store struct {
	db *gorm.DB
	// send hands committed outbox messages to the relay (outbox.Relay.Send),
	// which publishes them at once; what it cannot, its poll does.
	send func(msgs ...outbox.Message)
	now  func() time.Time
}

var (
	_ payment.Store = (*Store)(nil)
	_ payment.Tx    = (*tx)(nil)
)

// New returns a store over db. send gets the events of every transaction
// that added some, once it committed (the relay's Send;
// platform.Wiring.Outbox.Send).
func New(db *gorm.DB, send func(msgs ...outbox.Message)) *Store {
	return &Store{db: db, send: send, now: func() time.Time { return time.Now().UTC() }}
}

// paymentRow is the payments table.
type paymentRow struct {
	ID               uint64 `gorm:"primaryKey"`
	OutTradeNo       string
	OrderNo          string
	UserID           uint64
	Amount           int64
	Status           string
	Channel          string
	PlatformSerial   string
	PaidAt           *time.Time
	OrderCancelledAt *time.Time
	CancelReason     string
	QueriedAt        *time.Time
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

func (paymentRow) TableName() string { return "payments" }

// transactionRow is payment_transaction and, under another table name,
// payment_transaction_broken.
type transactionRow struct {
	ID             uint64 `gorm:"primaryKey"`
	Channel        string
	PlatformSerial string
	OutTradeNo     string
	Amount         int64
	PaidAt         time.Time
	CreatedAt      time.Time
}

const (
	tableTransaction       = "payment_transaction"
	tableTransactionBroken = "payment_transaction_broken"
)

// byOutTradeNo is the payments table for a conditional update of one
// payment, found by its unique out_trade_no (database.ByKey). Without it,
// on a small table, a close racing the customer's notification deadlocked
// in idx_payments_status_created and the close answered 500.
func byOutTradeNo(db *gorm.DB) *gorm.DB {
	return database.ByKey(db, "payments", "uk_payments_out_trade_no")
}

func toPayment(r paymentRow) payment.Payment {
	return payment.Payment{
		ID: r.ID, OutTradeNo: r.OutTradeNo, OrderNo: r.OrderNo, UserID: r.UserID, Amount: r.Amount,
		Status: payment.Status(r.Status), Channel: r.Channel, PlatformSerial: r.PlatformSerial,
		PaidAt: r.PaidAt, OrderCancelledAt: r.OrderCancelledAt, CancelReason: r.CancelReason,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func toDBPayment(p payment.Payment) paymentRow {
	return paymentRow{
		ID: p.ID, OutTradeNo: p.OutTradeNo, OrderNo: p.OrderNo, UserID: p.UserID, Amount: p.Amount,
		Status: string(p.Status), Channel: p.Channel, PlatformSerial: p.PlatformSerial,
		PaidAt: p.PaidAt, OrderCancelledAt: p.OrderCancelledAt, CancelReason: p.CancelReason,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func (s *Store) toDBTransaction(t payment.Transaction) transactionRow {
	return transactionRow{
		Channel: t.Channel, PlatformSerial: t.PlatformSerial, OutTradeNo: t.OutTradeNo,
		Amount: t.Amount, PaidAt: t.PaidAt.UTC(), CreatedAt: s.now(),
	}
}

// addEvent writes e to the outbox through db, a transaction or the pool.
func addEvent(db *gorm.DB, e events.Event) (outbox.Message, error) {
	msg, err := outbox.JSON(e.ID, e.Subject, e.Payload)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("add %s to outbox: %w", e.Subject, err)
	}
	// Add fills in what it writes (the trace headers) on the slice's
	// element, which is what the relay must publish.
	msgs := []outbox.Message{msg}
	if err := outbox.Add(db, msgs...); err != nil {
		return outbox.Message{}, fmt.Errorf("add %s to outbox: %w", e.Subject, err)
	}
	return msgs[0], nil
}

// Create inserts p; the unique key on order_no turns a second create for the
// same order into a read of the first (insert first, read on conflict: a
// check before the insert would race).
func (s *Store) Create(ctx context.Context, p payment.Payment) (payment.Payment, bool, error) {
	now := s.now()
	p.CreatedAt, p.UpdatedAt = now, now
	row := toDBPayment(p)
	err := quiet(s.db.WithContext(ctx)).Create(&row).Error
	if err == nil {
		return toPayment(row), true, nil
	}
	if !database.IsDuplicateKey(err) {
		return payment.Payment{}, false, fmt.Errorf("insert payment for order %s: %w", p.OrderNo, err)
	}
	existing, err := s.GetByOrder(ctx, p.OrderNo)
	if err != nil {
		return payment.Payment{}, false, fmt.Errorf("read payment for order %s: %w", p.OrderNo, err)
	}
	return existing, false, nil
}

// Get returns the payment with out_trade_no.
func (s *Store) Get(ctx context.Context, outTradeNo string) (payment.Payment, error) {
	return get(s.db.WithContext(ctx), "out_trade_no", outTradeNo)
}

// GetByOrder returns the payment of orderNo.
func (s *Store) GetByOrder(ctx context.Context, orderNo string) (payment.Payment, error) {
	return get(s.db.WithContext(ctx), "order_no", orderNo)
}

// quiet returns db with gorm's statement logging off, for statements whose
// failure is an expected outcome rather than an error.
func quiet(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{Logger: db.Logger.LogMode(logger.Silent)})
}

// get reads the payment whose column (out_trade_no or order_no, both
// unique) is value.
func get(db *gorm.DB, column, value string) (payment.Payment, error) {
	var row paymentRow
	err := db.Where(column+" = ?", value).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return payment.Payment{}, payment.ErrNotFound
	}
	if err != nil {
		return payment.Payment{}, fmt.Errorf("read payment %s %s: %w", column, value, err)
	}
	return toPayment(row), nil
}

// MarkClosed is the close's conditional update WAIT_PAY → CLOSED.
func (s *Store) MarkClosed(ctx context.Context, outTradeNo string) (bool, error) {
	res := byOutTradeNo(s.db.WithContext(ctx)).
		Where("out_trade_no = ? AND status = ?", outTradeNo, string(payment.StatusWaitPay)).
		Updates(map[string]any{"status": string(payment.StatusClosed), "updated_at": s.now()})
	if res.Error != nil {
		return false, fmt.Errorf("close payment %s: %w", outTradeNo, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DueForQuery reads the WAIT_PAY payments the payment-query job asks the
// platform about, least recently asked first, so that a long backlog is
// worked through rather than its head asked again and again.
func (s *Store) DueForQuery(ctx context.Context, createdAfter, createdBefore time.Time, limit int) ([]payment.Payment, error) {
	var rows []paymentRow
	err := s.db.WithContext(ctx).
		Where("status = ? AND created_at > ? AND created_at <= ?", string(payment.StatusWaitPay), createdAfter, createdBefore).
		Order("queried_at IS NOT NULL, queried_at, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read payments due for a query: %w", err)
	}
	out := make([]payment.Payment, len(rows))
	for i, r := range rows {
		out[i] = toPayment(r)
	}
	return out, nil
}

// MarkQueried records the query of a payment that is still WAIT_PAY.
func (s *Store) MarkQueried(ctx context.Context, outTradeNo string, at time.Time) error {
	err := byOutTradeNo(s.db.WithContext(ctx)).
		Where("out_trade_no = ? AND status = ?", outTradeNo, string(payment.StatusWaitPay)).
		Update("queried_at", at).Error
	if err != nil {
		return fmt.Errorf("mark payment %s queried: %w", outTradeNo, err)
	}
	return nil
}

// InTx runs fn in one transaction and checks the commit; after a commit
// that added events it sends them. A failed commit sends nothing: it may
// have committed all the same (a lost acknowledgement), and then the
// relay's poll publishes its events.
func (s *Store) InTx(ctx context.Context, fn func(payment.Tx) error) error {
	t := &tx{s: s}
	err := s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
		t.db, t.msgs = db, nil
		return fn(t)
	})
	if err != nil {
		return err
	}
	if len(t.msgs) > 0 {
		s.send(t.msgs...)
	}
	return nil
}

// InboxTx returns the payment.Tx view of the inbox consumer's transaction,
// which the consumer commits: the events added in it are sent after that
// commit (inbox.OnCommit).
func (s *Store) InboxTx(ctx context.Context, db *gorm.DB) payment.Tx {
	t := &tx{s: s, db: db}
	t.onFirstEvent = func() { inbox.OnCommit(ctx, func() { s.send(t.msgs...) }) }
	return t
}

// tx is the Store inside one transaction.
type tx struct {
	s  *Store
	db *gorm.DB
	// msgs are the outbox messages added, as outbox.Add filled them in.
	msgs []outbox.Message
	// onFirstEvent, when set, arranges the send with whoever commits a
	// transaction InTx does not own (InboxTx).
	onFirstEvent func()
}

func (t *tx) InsertTransaction(ctx context.Context, tr payment.Transaction) error {
	row := t.s.toDBTransaction(tr)
	// A duplicate key is the expected answer to every redelivered
	// notification, so gorm must not log it as an error; any other error is
	// returned and logged once at the edge.
	err := quiet(t.db.WithContext(ctx)).Table(tableTransaction).Create(&row).Error
	if database.IsDuplicateKey(err) {
		return payment.ErrDuplicateTxn
	}
	if err != nil {
		return fmt.Errorf("insert payment transaction %s/%s: %w", tr.Channel, tr.PlatformSerial, err)
	}
	return nil
}

func (t *tx) MarkPaid(ctx context.Context, tr payment.Transaction) (bool, error) {
	return t.recordTransaction(ctx, tr, payment.StatusWaitPay, payment.StatusPaid)
}

func (t *tx) MarkRefunding(ctx context.Context, tr payment.Transaction) (bool, error) {
	return t.recordTransaction(ctx, tr, payment.StatusClosed, payment.StatusRefunding)
}

// recordTransaction moves the payment from → to and records tr on it, with
// a conditional update whose rows affected say whether this call moved it.
func (t *tx) recordTransaction(ctx context.Context, tr payment.Transaction, from, to payment.Status) (bool, error) {
	paidAt := tr.PaidAt.UTC()
	res := byOutTradeNo(t.db.WithContext(ctx)).
		Where("out_trade_no = ? AND status = ?", tr.OutTradeNo, string(from)).
		Updates(map[string]any{
			"status":          string(to),
			"channel":         tr.Channel,
			"platform_serial": tr.PlatformSerial,
			"paid_at":         paidAt,
			"updated_at":      t.s.now(),
		})
	if res.Error != nil {
		return false, fmt.Errorf("mark payment %s %s: %w", tr.OutTradeNo, to, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (t *tx) MarkRefunded(ctx context.Context, outTradeNo string, at time.Time) (bool, error) {
	res := byOutTradeNo(t.db.WithContext(ctx)).
		Where("out_trade_no = ? AND status = ?", outTradeNo, string(payment.StatusRefunding)).
		Updates(map[string]any{"status": string(payment.StatusRefunded), "updated_at": at.UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("mark payment %s refunded: %w", outTradeNo, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RecordCancellation is one statement: insert the placeholder, or, when the
// order has a payment (the unique order_no), record the cancellation on it
// unless an earlier one is recorded already. MySQL counts 1 affected row for an insert,
// 2 for an update that changed the row, 0 for one that changed nothing.
func (t *tx) RecordCancellation(ctx context.Context, c payment.Cancellation, placeholder payment.Payment) (bool, error) {
	now := t.s.now()
	cancelledAt := c.CancelledAt.UTC()
	placeholder.OrderCancelledAt, placeholder.CancelReason = &cancelledAt, c.Reason
	placeholder.CreatedAt, placeholder.UpdatedAt = now, now
	row := toDBPayment(placeholder)
	// The earliest cancellation wins, whatever order the copies are
	// processed in. MySQL applies the assignments left to right, each
	// seeing the ones before it: the reason is decided while
	// order_cancelled_at still holds the value it is compared with.
	const earlier = "order_cancelled_at IS NULL OR VALUES(order_cancelled_at) < order_cancelled_at"
	res := t.db.WithContext(ctx).Clauses(clause.OnConflict{DoUpdates: clause.Set{
		{Column: clause.Column{Name: "cancel_reason"}, Value: gorm.Expr("IF(" + earlier + ", VALUES(cancel_reason), cancel_reason)")},
		{Column: clause.Column{Name: "order_cancelled_at"}, Value: gorm.Expr("IF(" + earlier + ", VALUES(order_cancelled_at), order_cancelled_at)")},
	}}).Create(&row)
	if res.Error != nil {
		return false, fmt.Errorf("record the cancellation of order %s: %w", c.OrderNo, res.Error)
	}
	return res.RowsAffected > 0, nil
}

func (t *tx) Get(ctx context.Context, outTradeNo string) (payment.Payment, error) {
	return get(t.db.WithContext(ctx), "out_trade_no", outTradeNo)
}

func (t *tx) AddEvent(ctx context.Context, e events.Event) error {
	msg, err := addEvent(t.db.WithContext(ctx), e)
	if err != nil {
		return err
	}
	if len(t.msgs) == 0 && t.onFirstEvent != nil {
		t.onFirstEvent()
	}
	t.msgs = append(t.msgs, msg)
	return nil
}

func (s *Store) hasBrokenRecords(db *gorm.DB) (bool, error) {
	var n int
	err := db.Raw(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, tableTransactionBroken).
		Scan(&n).Error
	if err != nil {
		return false, fmt.Errorf("look for %s: %w", tableTransactionBroken, err)
	}
	return n > 0, nil
}
