// Package payment is the payment domain: a payment for one order, its state
// machine (WAIT_PAY → PAID, once), the platform transaction that paid it, and
// the Store the use cases need. It imports no gin, gorm, nats or redis.
package payment

import (
	"context"
	"errors"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
)

// Status is a payment's state.
type Status string

// The payment state machine: WAIT_PAY → PAID, or WAIT_PAY → CLOSED. A paid or
// closed payment never changes again.
const (
	StatusWaitPay Status = "WAIT_PAY"
	StatusPaid    Status = "PAID"
	StatusClosed  Status = "CLOSED"
)

// Sentinel errors of the domain. The HTTP layer maps each to one status.
var (
	ErrNotFound         = errors.New("payment not found")
	ErrOrderNotFound    = errors.New("order not found")
	ErrOrderNotPayable  = errors.New("order is not waiting for payment")
	ErrAmountMismatch   = errors.New("notified amount differs from the payment amount")
	ErrConflict         = errors.New("payment is already settled by another transaction")
	ErrDuplicateTxn     = errors.New("platform transaction already recorded")
	ErrBadNotification  = errors.New("malformed notification")
	ErrPlatformRejected = errors.New("payment platform refused the charge")
)

// Payment is one attempt to collect an order's amount through the platform.
type Payment struct {
	ID         uint64
	OutTradeNo string // our number, sent to the platform; unique
	OrderNo    string // unique too: one payment per order
	Amount     int64  // cents, copied from the order at creation
	Status     Status
	// Channel and PlatformSerial name the platform transaction that paid
	// the payment; empty until PAID.
	Channel        string
	PlatformSerial string
	PaidAt         *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// PaidBy reports whether p was paid by the platform transaction (channel, serial).
func (p Payment) PaidBy(channel, serial string) bool {
	return p.Status == StatusPaid && p.Channel == channel && p.PlatformSerial == serial
}

// Transaction is a platform transaction as notified: the payment record.
type Transaction struct {
	Channel        string
	PlatformSerial string
	OutTradeNo     string
	Amount         int64
	PaidAt         time.Time
}

// Order is what the payment service needs to know about an order.
type Order struct {
	OrderNo string
	Amount  int64
	Status  string
}

// OrderWaitPay is the order status that admits a payment.
const OrderWaitPay = "WAIT_PAY"

// Outcome is how a notification was handled; both answer 2xx.
type Outcome string

// Outcomes of a handled notification.
const (
	Processed Outcome = "processed" // this notification paid the payment
	Duplicate Outcome = "duplicate" // already processed earlier: nothing done
)

// Store keeps payments. Every method is safe for concurrent use.
type Store interface {
	// Create inserts p unless a payment for the same order exists, in
	// which case it returns that one and created=false.
	Create(ctx context.Context, p Payment) (_ Payment, created bool, _ error)
	// Get returns the payment with out_trade_no, or ErrNotFound.
	Get(ctx context.Context, outTradeNo string) (Payment, error)
	// InTx runs fn in one database transaction, committed when fn returns
	// nil and rolled back otherwise; the commit's error is returned as is.
	// The events fn added are published after the commit.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Reconcile lists, among the payment records created and the payments
	// paid since since, the inconsistencies of Report, at most limit of
	// each kind. It reads every record table the database has: the lab's
	// payment_transaction_broken too, where the lab schema is applied.
	Reconcile(ctx context.Context, since time.Time, limit int) (Report, error)

	// The steps of the broken callback handler, each its own statement
	// outside any transaction. Only handlePaidBroken uses them.

	// InsertBrokenRecord inserts into payment_transaction_broken, the lab
	// table without a unique key.
	InsertBrokenRecord(ctx context.Context, t Transaction) error
	// SetPaid sets the payment PAID without any condition on its status.
	SetPaid(ctx context.Context, t Transaction) error
	// AddEvent writes e to the outbox in its own statement and has it
	// published.
	AddEvent(ctx context.Context, e events.Event) error
	// CheckBrokenRecords reports an error, saying what to do, unless the
	// lab table InsertBrokenRecord writes exists.
	CheckBrokenRecords(ctx context.Context) error
}

// Tx is what a use case does inside one transaction of Store.InTx.
type Tx interface {
	// InsertTransaction records a platform transaction under the unique key
	// (channel, platform_serial); a second insert of the same key returns
	// ErrDuplicateTxn.
	InsertTransaction(ctx context.Context, t Transaction) error
	// MarkPaid moves the payment WAIT_PAY → PAID with a conditional update
	// and reports whether this call made the transition (rows affected = 1).
	MarkPaid(ctx context.Context, t Transaction) (bool, error)
	// Get re-reads a payment inside the transaction.
	Get(ctx context.Context, outTradeNo string) (Payment, error)
	// AddEvent writes e to the outbox in this transaction; it is published
	// once the transaction commits.
	AddEvent(ctx context.Context, e events.Event) error
}

// Report is the reconciliation's findings.
type Report struct {
	// MultipleRecords are payments with more than one payment record.
	MultipleRecords []RecordCount `json:"multiple_records"`
	// MissingEvents are paid payments without a payment.succeeded outbox row.
	MissingEvents []string `json:"missing_events"`
	// AmountMismatches are payment records whose amount differs from their payment's.
	AmountMismatches []AmountMismatch `json:"amount_mismatches"`
}

// Empty reports whether the reconciliation found nothing.
func (r Report) Empty() bool {
	return len(r.MultipleRecords) == 0 && len(r.MissingEvents) == 0 && len(r.AmountMismatches) == 0
}

// RecordCount is a payment with its number of records and events.
type RecordCount struct {
	OutTradeNo string `json:"out_trade_no"`
	Records    int    `json:"records"`
}

// AmountMismatch is a payment record whose amount differs from the payment's.
type AmountMismatch struct {
	OutTradeNo     string `json:"out_trade_no"`
	PlatformSerial string `json:"platform_serial"`
	Expected       int64  `json:"expected"`
	Recorded       int64  `json:"recorded"`
}
