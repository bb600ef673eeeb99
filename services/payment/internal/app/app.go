// Package app holds the payment service's use cases, one file each:
//
//	CreatePayment  create_payment.go  POST /payments
//	GetPayment     get_payment.go     GET /payments/:no
//	HandlePaid     handle_paid.go     POST /payments/callback: the fix, or, in the lab,
//	                                  handle_paid_broken.go (incident 2), chosen by
//	                                  Config.Callback; handle_paid_lock.go is the
//	                                  optional entry lock in front of the fix
//	Reconcile      reconcile.go       GET /admin/reconcile and the reconcile job
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
	"github.com/oncemall/oncemall/services/payment/psp"
)

// Orders reads orders from the order service.
type Orders interface {
	// Order returns the order, or payment.ErrOrderNotFound.
	Order(ctx context.Context, orderNo string) (payment.Order, error)
}

// Platform is the payment platform's charge API.
type Platform interface {
	Charge(ctx context.Context, req psp.ChargeRequest) (psp.ChargeResponse, error)
}

// Config tunes the use cases.
type Config struct {
	// NotifyURL is sent with each charge as the platform's notify address;
	// empty lets the platform use its own default.
	NotifyURL string
	// Callback selects how HandlePaid applies a notification: variant.Fixed,
	// or variant.Broken to reproduce incident 2 (the lab only).
	Callback variant.Mode
	// CallbackLock puts the Redis entry lock in front of the fixed handler
	// (handle_paid_lock.go); CallbackLockTTL bounds how long a crashed
	// holder blocks its payment.
	CallbackLock    bool
	CallbackLockTTL time.Duration
	// ReconcileLookback is how far back Reconcile looks: recently paid
	// payments only, so that it never reports events the outbox cleanup
	// deleted long after they were sent.
	ReconcileLookback time.Duration
	// ReconcileLimit caps each list of the reconciliation report.
	ReconcileLimit int
}

// App is the payment service's use cases over their dependencies.
type App struct {
	store    payment.Store
	orders   Orders
	platform Platform
	locks    *redislock.Client
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	findings *prometheus.GaugeVec
	// handlePaid is the notification handler Config.Callback chose.
	handlePaid func(ctx context.Context, t payment.Transaction) (payment.Outcome, error)
}

// New returns the use cases and registers their metrics on reg. orders and
// charges (the payment platform) may be nil where only notifications are handled (the lab), and
// CreatePayment then fails; locks is needed only with Config.CallbackLock.
func New(store payment.Store, orders Orders, charges Platform, locks *redislock.Client, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*App, error) {
	if store == nil || log == nil {
		return nil, errors.New("app: store and logger are required")
	}
	if cfg.CallbackLock && locks == nil {
		return nil, errors.New("app: the callback lock needs a lock client")
	}
	if cfg.CallbackLockTTL <= 0 {
		cfg.CallbackLockTTL = 10 * time.Second
	}
	if cfg.ReconcileLookback <= 0 {
		cfg.ReconcileLookback = 72 * time.Hour
	}
	if cfg.ReconcileLimit <= 0 {
		cfg.ReconcileLimit = 100
	}
	findings, err := metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "payment_reconcile_findings",
		Help: "Findings of the last reconciliation by kind: multiple_records, missing_events, amount_mismatches.",
	}, []string{"kind"}))
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	a := &App{store: store, orders: orders, platform: charges, locks: locks, cfg: cfg, log: log,
		now: func() time.Time { return time.Now().UTC() }, findings: findings}
	switch cfg.Callback {
	case variant.Fixed:
		a.handlePaid = a.handlePaidFixed
		if cfg.CallbackLock {
			a.handlePaid = a.locked(a.handlePaidFixed)
		}
	case variant.Broken:
		log.Warn("payment callback handler is the BROKEN variant of incident 2: duplicate notifications record duplicate payments")
		a.handlePaid = a.handlePaidBroken
	default:
		return nil, fmt.Errorf("app: callback mode %q, want %s or %s", cfg.Callback, variant.Fixed, variant.Broken)
	}
	return a, nil
}

// CallbackMode is the notification handler HandlePaid runs: the handler
// label of the callback metrics.
func (a *App) CallbackMode() variant.Mode { return a.cfg.Callback }

// Check reports what would stop the chosen notification handler from
// working before the first notification finds out: the broken handler
// needs the lab's record table.
func (a *App) Check(ctx context.Context) error {
	if a.cfg.Callback == variant.Broken {
		return a.store.CheckBrokenRecords(ctx)
	}
	return nil
}
