// Package store implements payment.Store on MySQL/MariaDB with gorm.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Store is the gorm implementation of payment.Store.
type Store struct {
	db *gorm.DB
	// wake tells the outbox relay that rows were committed, so that it
	// publishes them at once rather than at its next poll.
	wake func()
	now  func() time.Time
}

var (
	_ payment.Store = (*Store)(nil)
	_ payment.Tx    = (*tx)(nil)
)

// New returns a store over db. wake is called after every commit that added
// events (the relay's Wake; platform.Wiring.Outbox.Wake).
func New(db *gorm.DB, wake func()) *Store {
	return &Store{db: db, wake: wake, now: func() time.Time { return time.Now().UTC() }}
}

// paymentRow is the payments table.
type paymentRow struct {
	ID             uint64 `gorm:"primaryKey"`
	OutTradeNo     string
	OrderNo        string
	Amount         int64
	Status         string
	Channel        string
	PlatformSerial string
	PaidAt         *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
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

func toPayment(r paymentRow) payment.Payment {
	return payment.Payment{
		ID: r.ID, OutTradeNo: r.OutTradeNo, OrderNo: r.OrderNo, Amount: r.Amount,
		Status: payment.Status(r.Status), Channel: r.Channel, PlatformSerial: r.PlatformSerial,
		PaidAt: r.PaidAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func toDBPayment(p payment.Payment) paymentRow {
	return paymentRow{
		ID: p.ID, OutTradeNo: p.OutTradeNo, OrderNo: p.OrderNo, Amount: p.Amount,
		Status: string(p.Status), Channel: p.Channel, PlatformSerial: p.PlatformSerial,
		PaidAt: p.PaidAt, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func (s *Store) toDBTransaction(t payment.Transaction) transactionRow {
	return transactionRow{
		Channel: t.Channel, PlatformSerial: t.PlatformSerial, OutTradeNo: t.OutTradeNo,
		Amount: t.Amount, PaidAt: t.PaidAt.UTC(), CreatedAt: s.now(),
	}
}

// addEvent writes e to the outbox through db, a transaction or the pool.
func addEvent(db *gorm.DB, e events.Event) error {
	msg, err := outbox.JSON(e.ID, e.Subject, e.Payload)
	if err == nil {
		err = outbox.Add(db, msg)
	}
	if err != nil {
		return fmt.Errorf("add %s to outbox: %w", e.Subject, err)
	}
	return nil
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
	var existing paymentRow
	if err := s.db.WithContext(ctx).Where("order_no = ?", p.OrderNo).Take(&existing).Error; err != nil {
		return payment.Payment{}, false, fmt.Errorf("read payment for order %s: %w", p.OrderNo, err)
	}
	return toPayment(existing), false, nil
}

// Get returns the payment with out_trade_no.
func (s *Store) Get(ctx context.Context, outTradeNo string) (payment.Payment, error) {
	return get(s.db.WithContext(ctx), outTradeNo)
}

// quiet returns db with gorm's statement logging off, for statements whose
// failure is an expected outcome rather than an error.
func quiet(db *gorm.DB) *gorm.DB {
	return db.Session(&gorm.Session{Logger: db.Logger.LogMode(logger.Silent)})
}

func get(db *gorm.DB, outTradeNo string) (payment.Payment, error) {
	var row paymentRow
	err := db.Where("out_trade_no = ?", outTradeNo).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return payment.Payment{}, payment.ErrNotFound
	}
	if err != nil {
		return payment.Payment{}, fmt.Errorf("read payment %s: %w", outTradeNo, err)
	}
	return toPayment(row), nil
}

// InTx runs fn in one transaction and checks the commit; after a commit
// that added events it wakes the relay.
func (s *Store) InTx(ctx context.Context, fn func(payment.Tx) error) error {
	t := &tx{s: s}
	err := s.db.WithContext(ctx).Transaction(func(db *gorm.DB) error {
		t.db = db
		return fn(t)
	})
	if err != nil {
		return err
	}
	if t.events > 0 {
		s.wake()
	}
	return nil
}

// tx is the Store inside one transaction.
type tx struct {
	s  *Store
	db *gorm.DB
	// events counts the outbox rows added, so that InTx wakes the relay
	// only when there is something to publish.
	events int
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
	paidAt := tr.PaidAt.UTC()
	res := t.db.WithContext(ctx).Model(&paymentRow{}).
		Where("out_trade_no = ? AND status = ?", tr.OutTradeNo, string(payment.StatusWaitPay)).
		Updates(map[string]any{
			"status":          string(payment.StatusPaid),
			"channel":         tr.Channel,
			"platform_serial": tr.PlatformSerial,
			"paid_at":         paidAt,
			"updated_at":      t.s.now(),
		})
	if res.Error != nil {
		return false, fmt.Errorf("mark payment %s paid: %w", tr.OutTradeNo, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (t *tx) Get(ctx context.Context, outTradeNo string) (payment.Payment, error) {
	return get(t.db.WithContext(ctx), outTradeNo)
}

func (t *tx) AddEvent(ctx context.Context, e events.Event) error {
	if err := addEvent(t.db.WithContext(ctx), e); err != nil {
		return err
	}
	t.events++
	return nil
}

// InsertBrokenRecord is a step of the broken handler: a plain insert into a
// table with no unique key, so every concurrent copy gets its own row. The
// table is lab schema (services/payment/lab), which the production
// migrations never create.
func (s *Store) InsertBrokenRecord(ctx context.Context, tr payment.Transaction) error {
	row := s.toDBTransaction(tr)
	if err := s.db.WithContext(ctx).Table(tableTransactionBroken).Create(&row).Error; err != nil {
		return fmt.Errorf("insert broken payment record %s: %w", tr.PlatformSerial, err)
	}
	return nil
}

// SetPaid is a step of the broken handler: an update with no condition on
// the status, so it "succeeds" for every copy that passed the earlier read.
func (s *Store) SetPaid(ctx context.Context, tr payment.Transaction) error {
	paidAt := tr.PaidAt.UTC()
	err := s.db.WithContext(ctx).Model(&paymentRow{}).Where("out_trade_no = ?", tr.OutTradeNo).
		Updates(map[string]any{
			"status":          string(payment.StatusPaid),
			"channel":         tr.Channel,
			"platform_serial": tr.PlatformSerial,
			"paid_at":         paidAt,
			"updated_at":      s.now(),
		}).Error
	if err != nil {
		return fmt.Errorf("set payment %s paid: %w", tr.OutTradeNo, err)
	}
	return nil
}

// CheckBrokenRecords reports an error unless the database has
// payment_transaction_broken, the broken handler's table, which only the lab
// schema (services/payment/lab/migrations) creates.
func (s *Store) CheckBrokenRecords(ctx context.Context) error {
	ok, err := s.hasBrokenRecords(s.db.WithContext(ctx))
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("the broken callback handler writes %s, lab schema that the service's migrations do not create: apply services/payment/lab/migrations to database %s first",
			tableTransactionBroken, s.db.Migrator().CurrentDatabase())
	}
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

// AddEvent writes an outbox row on its own, outside any business
// transaction (the broken handler's last step), and wakes the relay.
func (s *Store) AddEvent(ctx context.Context, e events.Event) error {
	if err := addEvent(s.db.WithContext(ctx), e); err != nil {
		return err
	}
	s.wake()
	return nil
}

// Reconcile reads the payment record tables and the outbox. It only reads.
func (s *Store) Reconcile(ctx context.Context, since time.Time, limit int) (payment.Report, error) {
	db := s.db.WithContext(ctx)
	rep := payment.Report{MultipleRecords: []payment.RecordCount{}, MissingEvents: []string{}, AmountMismatches: []payment.AmountMismatch{}}

	// The broken handler's table exists only where the lab schema is
	// applied; where it does, its rows are payment records too, and the
	// damage they show is what reconciliation is for.
	lab, err := s.hasBrokenRecords(db)
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile: %w", err)
	}
	records := `SELECT out_trade_no, channel, platform_serial, amount, created_at FROM ` + tableTransaction
	if lab {
		records += ` UNION ALL SELECT out_trade_no, channel, platform_serial, amount, created_at FROM ` + tableTransactionBroken
	}
	err = db.Raw(`SELECT r.out_trade_no, COUNT(*) AS records FROM (`+records+`) r
		WHERE r.created_at >= ? GROUP BY r.out_trade_no HAVING COUNT(*) > 1 ORDER BY r.out_trade_no LIMIT ?`, since, limit).
		Scan(&rep.MultipleRecords).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile records: %w", err)
	}

	// The payment.succeeded body names the payment (payment_no); matching on
	// it finds the events of both handlers, whose message numbers differ.
	err = db.Raw(`SELECT p.out_trade_no FROM payments p
		WHERE p.status = ? AND p.paid_at >= ? AND NOT EXISTS (
			SELECT 1 FROM local_message m WHERE m.topic = ?
			AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(m.body USING utf8mb4), '$.payment_no')) = p.out_trade_no)
		ORDER BY p.out_trade_no LIMIT ?`, string(payment.StatusPaid), since, events.PaymentSucceeded, limit).
		Scan(&rep.MissingEvents).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile events: %w", err)
	}

	err = db.Raw(`SELECT r.out_trade_no, r.platform_serial, p.amount AS expected, r.amount AS recorded
		FROM (`+records+`) r JOIN payments p ON p.out_trade_no = r.out_trade_no
		WHERE r.amount <> p.amount AND r.created_at >= ? ORDER BY r.out_trade_no LIMIT ?`, since, limit).
		Scan(&rep.AmountMismatches).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile amounts: %w", err)
	}
	return rep, nil
}
