// Package app holds the order service's use cases, one file each:
//
//   - CreateOrder (create_order.go): validate, insert the order and its
//     order.created event in one transaction, wake the relay.
//   - GetOrder (get_order.go): read one order.
//   - MarkOrderPaid (mark_order_paid.go): apply a payment.succeeded event
//     inside the consumer's transaction: WAIT_PAY → PAID by conditional
//     update, plus the order.paid event.
//   - Reconcile (reconcile.go): list the orders, order.paid events and
//     dead-lettered payments that break the payment chain's invariants
//     (GET /admin/reconcile).
//
// The use cases see the database only through Store. Transactions are
// passed as *gorm.DB: that is the one gorm type this layer names, because
// the outbox row, the consumer's dedup row and an Idempotency-Key record
// must all join the same transaction as the business change.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Store is what the use cases need from persistence.
type Store interface {
	// Transaction runs fn in one transaction and commits it (a failed
	// commit is an error); an error from fn rolls back.
	Transaction(ctx context.Context, fn func(tx *gorm.DB) error) error
	// Insert writes a new order with its items.
	Insert(tx *gorm.DB, o order.Order) error
	// Get reads an order through db (nil: the pool); forUpdate takes the
	// row lock, which also reads the latest committed version.
	Get(ctx context.Context, db *gorm.DB, no string, forUpdate bool) (order.Order, error)
	// MarkPaid is the conditional update WAIT_PAY → PAID; it reports
	// whether this call changed the row.
	MarkPaid(tx *gorm.DB, no, paymentNo string, paidAt time.Time) (bool, error)
	// Reconcile reads, and only reads, up to q.Limit anomalies of each kind
	// (see order.AnomalyKind).
	Reconcile(ctx context.Context, q order.ReconcileQuery) ([]order.Anomaly, error)
}

// Waker is the outbox relay as the use cases see it.
type Waker interface{ Wake() }

// TxHook runs last inside CreateOrder's transaction, after the order and
// its event are written, with the order as created; an error rolls the whole
// transaction back. The HTTP handler uses it to build its response and
// complete the Idempotency-Key record atomically with the order.
type TxHook func(tx *gorm.DB, o order.Order) error

// App is the set of use cases.
type App struct {
	store Store
	relay Waker
	log   *slog.Logger
	now   func() time.Time
	// subjectPrefix is put before order.created and order.paid; empty in
	// production (see WithSubjectPrefix).
	subjectPrefix string
	// reconcileLookback is how far back Reconcile looks for paid orders and
	// dead letters (see WithReconcileLookback).
	reconcileLookback time.Duration
}

// New returns the use cases over store, waking relay after commits that
// wrote outbox rows.
func New(store Store, relay Waker, log *slog.Logger) *App {
	return &App{store: store, relay: relay, log: log, now: func() time.Time { return time.Now().UTC() },
		reconcileLookback: outbox.DefaultRetention}
}

// WithSubjectPrefix makes the use cases publish order.created and order.paid
// as prefix+subject, so that a test's services use their own stream
// (EVENT_SUBJECT_PREFIX). It returns a.
func (a *App) WithSubjectPrefix(prefix string) *App {
	a.subjectPrefix = prefix
	return a
}

// WithReconcileLookback makes Reconcile check the orders this service marked
// paid, and the payment.succeeded dead letters recorded, within d: pass the
// outbox retention (OUTBOX_RETENTION), after which sent order.paid rows are
// deleted and a paid order has no event to show. A dead letter older than d
// is no longer reported: nothing deletes dead_message rows, so without the
// bound one dead letter would keep the reconciler from ever being empty
// again. The default is the outbox's default retention. It returns a.
func (a *App) WithReconcileLookback(d time.Duration) *App {
	if d > 0 {
		a.reconcileLookback = d
	}
	return a
}

// newOrderNo returns a unique, roughly time-ordered order number:
// "O" + UTC time to the millisecond + 8 random hex digits.
func newOrderNo(now time.Time) (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("order number: %w", err)
	}
	return fmt.Sprintf("O%s%03d%s", now.Format("20060102150405"), now.Nanosecond()/1e6, hex.EncodeToString(b)), nil
}
