// Package app holds the payment service's use cases, one file each:
//
//	CreatePayment        create_payment.go         POST /payments
//	GetPayment           get_payment.go            GET /payments/:no
//	HandlePaid           handle_paid.go            POST /payments/callback: the fix (incident 2);
//	                                               the lab's broken PaidHandler replaces it
//	                                               (services/payment/lab/handle_paid_broken.go);
//	                                               handle_paid_lock.go is the optional entry lock
//	CloseOrderPayment    close_order_payment.go    POST /internal/orders/:no/close
//	QueryPayments        query_payments.go         the payment-query job
//	SendRefunds          send_refunds.go           the payment-refund job
//	HandleRefunded       handle_refunded.go        POST /payments/refunds/callback
//	RecordOrderCancelled record_order_cancelled.go the order.cancelled consumer
//	Reconcile            reconcile.go              GET /admin/reconcile and the reconcile job
//
// Every path that learns of a platform payment (a notification, a query, a
// close the platform answers "paid") applies it through one function,
// handlePaidFixed in handle_paid.go, so that the unique platform serial and
// the conditional updates decide once, whichever path comes first.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Orders reads orders from the order service.
type Orders interface {
	// Order returns the order as its owner userID sees it, or
	// payment.ErrOrderNotFound (also when userID is not its owner).
	Order(ctx context.Context, userID uint64, orderNo string) (payment.Order, error)
}

// Platform is the payment platform's API (psp.Client).
type Platform interface {
	Charge(ctx context.Context, req psp.ChargeRequest) (psp.ChargeResponse, error)
	Close(ctx context.Context, outTradeNo string) (psp.CloseResponse, error)
	Query(ctx context.Context, outTradeNo string) (psp.Trade, error)
	Refund(ctx context.Context, req psp.RefundRequest) (psp.RefundResponse, error)
}

// PaidHandler applies a verified "paid" notification: incident 2's choice.
// The fix is the App's own (handle_paid.go); a lab substitutes its broken
// handler through Deps.Paid.
type PaidHandler interface {
	HandlePaid(ctx context.Context, t payment.Transaction) (payment.Outcome, error)
	// Variant names the handler in the callback metrics: fixed or broken.
	Variant() variant.Mode
}

// Locks takes named locks that expire after ttl (pkg/redislock behind an
// adapter). Acquire returns ErrLockHeld while another holder has name.
type Locks interface {
	Acquire(ctx context.Context, name string, ttl time.Duration) (release func(context.Context) error, err error)
}

// ErrLockHeld is Locks.Acquire's answer while another holder has the lock.
var ErrLockHeld = errors.New("lock held by another holder")

// Deps are what the use cases run on. Store and Log are required; Orders
// and Platform may be nil where only notifications are handled, and the
// use cases that need them then fail; Locks is needed only with
// Config.CallbackLock.
type Deps struct {
	Store    payment.Store
	Orders   Orders
	Platform Platform
	Locks    Locks
	Log      *slog.Logger
	// Registry gets the use cases' metrics.
	Registry prometheus.Registerer
	// Clock is the use cases' clock; nil is time.Now in UTC.
	Clock func() time.Time
	// Paid replaces the fixed notification handler; nil is the fix. Only
	// the lab sets it (its broken handler of incident 2).
	Paid PaidHandler
}

// Config tunes the use cases.
type Config struct {
	// NotifyURL is sent with each charge as the platform's notify address;
	// empty lets the platform use its own default. RefundNotifyURL is the
	// same for refund requests.
	NotifyURL       string
	RefundNotifyURL string
	// CallbackLock puts the Redis entry lock in front of the fixed handler
	// (handle_paid_lock.go); CallbackLockTTL bounds how long a crashed
	// holder blocks its payment.
	CallbackLock    bool
	CallbackLockTTL time.Duration
	// QueryAfter is how long a payment waits for its notification before
	// QueryPayments asks the platform about it; QueryHorizon is the age at
	// which it stops asking, and the reconciler reports a payment still
	// WAIT_PAY. QueryBatch caps the payments one run asks about.
	QueryAfter   time.Duration
	QueryHorizon time.Duration
	QueryBatch   int
	// RefundBatch caps the refunds one SendRefunds run sends; RefundLease
	// hides a claimed refund from other claimers while its request is under
	// way (longer than a platform call); a failed request is retried after
	// RefundBackoff, doubled per attempt up to RefundBackoffMax.
	RefundBatch      int
	RefundLease      time.Duration
	RefundBackoff    time.Duration
	RefundBackoffMax time.Duration
	// RefundAlertAfter is how long a refund may wait for the platform
	// before the reconciler reports it.
	RefundAlertAfter time.Duration
	// ReconcileLookback is how far back Reconcile looks: recently paid
	// payments only, so that it never reports events the outbox cleanup
	// deleted long after they were sent.
	ReconcileLookback time.Duration
	// ReconcileLimit caps each list of the reconciliation report.
	ReconcileLimit int
}

// withDefaults fills what a caller left zero (the lab's rigs, tests) with
// the service's defaults.
func (c Config) withDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.CallbackLockTTL, 10*time.Second)
	set(&c.QueryAfter, 2*time.Minute)
	set(&c.QueryHorizon, time.Hour)
	set(&c.RefundLease, time.Minute)
	set(&c.RefundBackoff, 5*time.Second)
	set(&c.RefundBackoffMax, 10*time.Minute)
	set(&c.RefundAlertAfter, 30*time.Minute)
	set(&c.ReconcileLookback, 72*time.Hour)
	if c.QueryBatch <= 0 {
		c.QueryBatch = 100
	}
	if c.RefundBatch <= 0 {
		c.RefundBatch = 20
	}
	if c.ReconcileLimit <= 0 {
		c.ReconcileLimit = 100
	}
	return c
}

// App is the payment service's use cases over their dependencies.
type App struct {
	store    payment.Store
	orders   Orders
	platform Platform
	locks    Locks
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	m        appMetrics
	// paid is the notification handler: the fix, or Deps.Paid.
	paid PaidHandler
}

// appMetrics are what an operator watches of the use cases.
type appMetrics struct {
	findings *prometheus.GaugeVec
	closes   *prometheus.CounterVec
	queries  *prometheus.CounterVec
	refunds  *prometheus.CounterVec
}

func newAppMetrics(reg prometheus.Registerer) (appMetrics, error) {
	s := metrics.NewSet(reg)
	m := appMetrics{
		findings: s.Gauges("payment_reconcile_findings",
			"Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches, paid_cancelled_without_refund, late_refunds, stale_wait_pay, missing_refund_events.", "kind"),
		closes: s.Counters("payment_closes_total", "Closes asked by the order service, by outcome: closed, paid, error.", "outcome"),
		queries: s.Counters("payment_queries_total",
			"Active queries of waiting payments by the platform's answer: paid (applied: processed, duplicate or refunding), waiting, closed, unknown, error.", "answer"),
		refunds: s.Counters("payment_refund_requests_total", "Refund requests sent to the platform by outcome: accepted, failed.", "outcome"),
	}
	// Every kind reads 0 from the start, so the alert rules and the
	// dashboard see a series before the first reconciliation has run.
	metrics.Zero(m.findings.WithLabelValues, payment.Kinds...)
	return m, s.Err()
}

// New returns the use cases over d and registers their metrics on
// d.Registry.
func New(d Deps, cfg Config) (*App, error) {
	if d.Store == nil || d.Log == nil {
		return nil, errors.New("app: store and logger are required")
	}
	if cfg.CallbackLock && d.Locks == nil {
		return nil, errors.New("app: the callback lock needs a lock client")
	}
	cfg = cfg.withDefaults()
	if cfg.QueryHorizon <= cfg.QueryAfter {
		return nil, fmt.Errorf("app: the query horizon %s must be longer than the query delay %s", cfg.QueryHorizon, cfg.QueryAfter)
	}
	m, err := newAppMetrics(d.Registry)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	now := d.Clock
	if now == nil {
		now = func() time.Time { return time.Now().UTC() }
	}
	a := &App{store: d.Store, orders: d.Orders, platform: d.Platform, locks: d.Locks, cfg: cfg, log: d.Log, now: now, m: m}
	a.paid = fixedPaid{a.handlePaidFixed}
	if cfg.CallbackLock {
		a.paid = fixedPaid{a.locked(a.handlePaidFixed)}
	}
	if d.Paid != nil {
		a.paid = d.Paid
	}
	return a, nil
}

// fixedPaid is the fix as a PaidHandler.
type fixedPaid struct {
	apply func(context.Context, payment.Transaction) (payment.Outcome, error)
}

func (f fixedPaid) HandlePaid(ctx context.Context, t payment.Transaction) (payment.Outcome, error) {
	return f.apply(ctx, t)
}

func (fixedPaid) Variant() variant.Mode { return variant.Fixed }

// CallbackMode is the notification handler HandlePaid runs: the handler
// label of the callback metrics.
func (a *App) CallbackMode() variant.Mode { return a.paid.Variant() }

// PaymentSucceeded is the payment.succeeded body for p paid by t, for a
// handler outside the package (the lab's) to publish what the fix does.
func PaymentSucceeded(p payment.Payment, t payment.Transaction) events.PaymentSucceededV1 {
	return paymentSucceeded(p, t)
}

// errNoPlatform is what a use case that needs the platform answers in a
// lab rig assembled without one.
var errNoPlatform = errors.New("no payment platform configured")

// platformErr classifies a failed platform call for the edge: a refusal
// stays a refusal, anything else is an unknown outcome.
func platformErr(err error) error {
	if errors.Is(err, psp.ErrRefused) {
		return errors.Join(payment.ErrPlatformRejected, err)
	}
	return errors.Join(payment.ErrPlatformUnavailable, err)
}
