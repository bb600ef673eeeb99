// Package payment is the payment domain: a payment for one order, its state
// machine, the platform transaction that paid it, the refund of a payment
// that arrived after its order was closed, and the Store the use cases
// need. It imports no gin, gorm, nats or redis.
package payment

import (
	"context"
	"errors"
	"time"

	"github.com/oncemall/oncemall/pkg/events"
)

// Status is a payment's state.
type Status string

// The payment state machine. Every move is a conditional update on the
// state it leaves, so each happens once:
//
//	WAIT_PAY → PAID        a verified notification (or a query, or a close
//	                       the platform answered "paid") for a payment whose
//	                       order is open
//	WAIT_PAY → CLOSED      its order is being closed and the platform closed
//	                       the charge; a payment inserted CLOSED is the
//	                       placeholder of an order closed before it had one
//	CLOSED → REFUNDING     the customer paid anyway (the close and the payment
//	                       crossed): the platform transaction is recorded and
//	                       one refund row written, in one transaction
//	REFUNDING → REFUNDED   the platform's verified refund notification
//
// A payment of a closed order never passes through PAID: PAID means "this
// order is paid" to every reader (payment.succeeded, the order service, the
// reconciler), and it is not.
const (
	StatusWaitPay   Status = "WAIT_PAY"
	StatusPaid      Status = "PAID"
	StatusClosed    Status = "CLOSED"
	StatusRefunding Status = "REFUNDING"
	StatusRefunded  Status = "REFUNDED"
)

// Sentinel errors of the domain. The HTTP layer maps each to one status.
var (
	ErrNotFound         = errors.New("payment not found")
	ErrOrderNotFound    = errors.New("order not found")
	ErrOrderNotPayable  = errors.New("order is not waiting for payment")
	ErrOrderClosed      = errors.New("order is closed: its payment cannot be made")
	ErrAmountMismatch   = errors.New("notified amount differs from the payment amount")
	ErrConflict         = errors.New("payment is already settled by another transaction")
	ErrDuplicateTxn     = errors.New("platform transaction already recorded")
	ErrBadNotification  = errors.New("malformed notification")
	ErrPlatformRejected = errors.New("payment platform refused the charge")
	// ErrPlatformUnavailable is a platform call whose outcome is unknown (a
	// timeout, a 5xx): nothing was decided, the caller tries again later.
	ErrPlatformUnavailable = errors.New("payment platform did not answer")
	// ErrOrderServiceUnavailable is a read of the order that failed (the
	// order service timed out, answered 5xx, or answered what cannot be
	// read): nothing was decided, the same request may succeed in a moment.
	ErrOrderServiceUnavailable = errors.New("the order service is unavailable")
	ErrRefundNotFound          = errors.New("refund not found")
	ErrDuplicateRefund         = errors.New("refund already recorded")
)

// Payment is one attempt to collect an order's amount through the platform.
type Payment struct {
	ID         uint64
	OutTradeNo string // our number, sent to the platform; unique
	OrderNo    string // unique too: one payment per order
	// UserID is the order's owner, the only caller who may see the payment
	// (0 for a placeholder the close inserted without knowing the order).
	UserID uint64
	Amount int64 // cents, the order's pay_amount at creation
	Status Status
	// Channel and PlatformSerial name the platform transaction that paid
	// the payment; empty until PAID (or REFUNDING).
	Channel        string
	PlatformSerial string
	PaidAt         *time.Time
	// OrderCancelledAt records the order's order.cancelled event, for the
	// reconciler: a paid payment of a cancelled order needs a refund.
	OrderCancelledAt *time.Time
	CancelReason     string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// PaidBy reports whether the platform transaction (channel, serial) is the
// one recorded on p: p is PAID by it, or was paid by it after its order
// closed and is being (or was) refunded.
func (p Payment) PaidBy(channel, serial string) bool {
	switch p.Status {
	case StatusPaid, StatusRefunding, StatusRefunded:
		return p.Channel == channel && p.PlatformSerial == serial
	}
	return false
}

// Closed reports whether p's order was closed: CLOSED, or being refunded.
func (p Payment) Closed() bool {
	return p.Status == StatusClosed || p.Status == StatusRefunding || p.Status == StatusRefunded
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
	OrderNo   string
	UserID    uint64
	PayAmount int64 // what the customer pays: total minus discount
	Status    string
}

// Order statuses the payment service acts on: WAIT_PAY admits a payment,
// CANCELLED is a closed order.
const (
	OrderWaitPay   = "WAIT_PAY"
	OrderCancelled = "CANCELLED"
)

// Outcome is how a notification was handled; each answers 2xx.
type Outcome string

// Outcomes of a handled notification (and labels of the callback metrics).
const (
	Processed Outcome = "processed" // this notification paid the payment (or refunded it)
	Duplicate Outcome = "duplicate" // already processed earlier: nothing done
	// Refunding: the payment's order was closed; this notification recorded
	// the platform transaction and the refund that gives it back.
	Refunding Outcome = "refunding"
)

// CloseOutcome is the answer to the order service's close.
type CloseOutcome string

// Answers of a close.
const (
	// CloseClosed: no payment can be made for the order any more; the order
	// may close.
	CloseClosed CloseOutcome = "closed"
	// ClosePaid: the order is paid (its payment.succeeded is on its way);
	// the order must not close.
	ClosePaid CloseOutcome = "paid"
)

// RefundStatus is a refund's state: PENDING (to be sent to the platform) →
// SUBMITTED (the platform accepted it) → REFUNDED (its verified
// notification). A notification that overtakes the settling of the request
// moves PENDING → REFUNDED directly.
type RefundStatus string

// Refund states.
const (
	RefundPending   RefundStatus = "PENDING"
	RefundSubmitted RefundStatus = "SUBMITTED"
	RefundDone      RefundStatus = "REFUNDED"
)

// Refund gives back a payment that landed after its order was closed. There
// is at most one per payment, and its number is derived from the payment,
// so that every path that could ask for it asks for the same one.
type Refund struct {
	ID         uint64
	RefundNo   string
	OutTradeNo string
	OrderNo    string
	Amount     int64
	Status     RefundStatus
	// Channel is the platform that holds the payment; RefundSerial is the
	// platform's refund number, known once it accepted the request.
	Channel       string
	RefundSerial  string
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	SubmittedAt   *time.Time
	RefundedAt    *time.Time
}

// RefundNoFor is the refund number of the payment outTradeNo: one payment,
// one refund number, whoever asks.
func RefundNoFor(outTradeNo string) string { return "R" + outTradeNo }

// RefundResult is a verified refund notification.
type RefundResult struct {
	Channel      string
	RefundSerial string
	RefundNo     string
	OutTradeNo   string
	Amount       int64
	RefundedAt   time.Time
}

// Cancellation is an order's order.cancelled, as the payment records it.
type Cancellation struct {
	OrderNo     string
	UserID      uint64
	Reason      string
	CancelledAt time.Time
}

// Store keeps payments and refunds. Every method is safe for concurrent use.
type Store interface {
	// Create inserts p unless a payment for the same order exists, in
	// which case it returns that one and created=false.
	Create(ctx context.Context, p Payment) (_ Payment, created bool, _ error)
	// Get returns the payment with out_trade_no, or ErrNotFound.
	Get(ctx context.Context, outTradeNo string) (Payment, error)
	// GetByOrder returns the payment of order orderNo, or ErrNotFound.
	GetByOrder(ctx context.Context, orderNo string) (Payment, error)
	// MarkClosed moves the payment WAIT_PAY → CLOSED with a conditional
	// update and reports whether this call made the move.
	MarkClosed(ctx context.Context, outTradeNo string) (bool, error)
	// DueForQuery lists WAIT_PAY payments created between createdAfter and
	// createdBefore, least recently queried first, at most limit.
	DueForQuery(ctx context.Context, createdAfter, createdBefore time.Time, limit int) ([]Payment, error)
	// MarkQueried records that the platform was asked about the payment.
	MarkQueried(ctx context.Context, outTradeNo string, at time.Time) error
	// ClaimRefund takes the oldest PENDING refund due at now, if any, and
	// hides it from other claimers until now+lease, in a short transaction
	// of its own: the caller then calls the platform with no transaction
	// open, and settles with RefundSubmitted or RefundFailed.
	ClaimRefund(ctx context.Context, now time.Time, lease time.Duration) (_ Refund, ok bool, _ error)
	// RefundSubmitted moves the refund PENDING → SUBMITTED with the
	// platform's serial, and reports whether this call made the move (a
	// notification may have settled it first).
	RefundSubmitted(ctx context.Context, refundNo, refundSerial string, at time.Time) (bool, error)
	// RefundFailed records a failed attempt of a PENDING refund and when to
	// try it again.
	RefundFailed(ctx context.Context, refundNo string, next time.Time, reason string) error
	// GetRefund returns the refund refundNo, or ErrRefundNotFound.
	GetRefund(ctx context.Context, refundNo string) (Refund, error)
	// InTx runs fn in one database transaction, committed when fn returns
	// nil and rolled back otherwise; the commit's error is returned as is.
	// The events fn added are published after the commit.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Reconcile lists the inconsistencies of Report that q asks about, at
	// most q.Limit of each kind. It reads every record table the database
	// has: the lab's payment_transaction_broken too, where the lab schema
	// is applied.
	Reconcile(ctx context.Context, q ReconcileQuery) (Report, error)
}

// Tx is what a use case does inside one transaction of Store.InTx (or of
// the inbox consumer's transaction).
type Tx interface {
	// InsertTransaction records a platform transaction under the unique key
	// (channel, platform_serial); a second insert of the same key returns
	// ErrDuplicateTxn.
	InsertTransaction(ctx context.Context, t Transaction) error
	// MarkPaid moves the payment WAIT_PAY → PAID with a conditional update
	// and reports whether this call made the transition (rows affected = 1).
	MarkPaid(ctx context.Context, t Transaction) (bool, error)
	// MarkRefunding moves the payment CLOSED → REFUNDING, recording the
	// platform transaction t on it, with a conditional update, and reports
	// whether this call made the move.
	MarkRefunding(ctx context.Context, t Transaction) (bool, error)
	// InsertRefund writes r under the unique keys refund_no and
	// out_trade_no; a second refund for the payment returns
	// ErrDuplicateRefund.
	InsertRefund(ctx context.Context, r Refund) error
	// MarkRefundDone moves the refund PENDING or SUBMITTED → REFUNDED with
	// the platform's serial, and reports whether this call made the move.
	MarkRefundDone(ctx context.Context, r RefundResult) (bool, error)
	// MarkRefunded moves the payment REFUNDING → REFUNDED and reports
	// whether this call made the move.
	MarkRefunded(ctx context.Context, outTradeNo string, at time.Time) (bool, error)
	// RecordCancellation records c on the order's payment, keeping the
	// earliest cancellation; when the order has no payment it inserts
	// placeholder (CLOSED) carrying c, so that none can be made. It reports
	// whether this call recorded anything.
	RecordCancellation(ctx context.Context, c Cancellation, placeholder Payment) (bool, error)
	// Get re-reads a payment inside the transaction.
	Get(ctx context.Context, outTradeNo string) (Payment, error)
	// GetRefund re-reads a refund inside the transaction.
	GetRefund(ctx context.Context, refundNo string) (Refund, error)
	// AddEvent writes e to the outbox in this transaction; it is published
	// once the transaction commits.
	AddEvent(ctx context.Context, e events.Event) error
}

// ReconcileQuery says what a reconciliation looks at.
type ReconcileQuery struct {
	// Since bounds every finding: only rows created (or paid, or recorded)
	// since then are read.
	Since time.Time
	// RefundsBefore: a refund created before it and not REFUNDED is late.
	RefundsBefore time.Time
	// WaitPayBefore: a payment created before it and still WAIT_PAY is past
	// the query horizon.
	WaitPayBefore time.Time
	// Limit caps each list.
	Limit int
}

// Report is the reconciliation's findings. Each list is one kind, the label
// of payment_reconcile_findings{kind} (Kinds).
type Report struct {
	// MultipleRecords are payments with more than one payment record.
	MultipleRecords []RecordCount `json:"multiple_records"`
	// MissingEvents are paid payments without a payment.succeeded outbox row.
	MissingEvents []string `json:"missing_events"`
	// AmountMismatches are payment records whose amount differs from their payment's.
	AmountMismatches []AmountMismatch `json:"amount_mismatches"`
	// PaidCancelled are PAID payments whose order was cancelled, which no
	// refund gives back (the fixed close never lets one happen).
	PaidCancelled []string `json:"paid_cancelled_without_refund"`
	// LateRefunds are refunds not REFUNDED long after they were written.
	LateRefunds []LateRefund `json:"late_refunds"`
	// StaleWaitPay are payments still WAIT_PAY past the query horizon:
	// neither a notification, nor a query, nor the order's close settled
	// them.
	StaleWaitPay []string `json:"stale_wait_pay"`
	// MissingRefundEvents are refunded payments without a payment.refunded
	// outbox row.
	MissingRefundEvents []string `json:"missing_refund_events"`
}

// Kinds are the finding kinds, in the order Counts gives them.
var Kinds = []string{"multiple_records", "missing_events", "amount_mismatches",
	"paid_cancelled_without_refund", "late_refunds", "stale_wait_pay", "missing_refund_events"}

// Counts is the number of findings of each kind, keyed as Kinds.
func (r Report) Counts() map[string]int {
	return map[string]int{
		"multiple_records":              len(r.MultipleRecords),
		"missing_events":                len(r.MissingEvents),
		"amount_mismatches":             len(r.AmountMismatches),
		"paid_cancelled_without_refund": len(r.PaidCancelled),
		"late_refunds":                  len(r.LateRefunds),
		"stale_wait_pay":                len(r.StaleWaitPay),
		"missing_refund_events":         len(r.MissingRefundEvents),
	}
}

// Empty reports whether the reconciliation found nothing.
func (r Report) Empty() bool {
	for _, n := range r.Counts() {
		if n > 0 {
			return false
		}
	}
	return true
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

// LateRefund is a refund still waiting for the platform.
type LateRefund struct {
	RefundNo   string    `json:"refund_no"`
	OutTradeNo string    `json:"out_trade_no"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}
