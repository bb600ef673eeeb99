// Package app holds the payment service's use cases, one file each:
//
//	CreatePayment     create_payment.go      POST /payments
//	GetPayment        get_payment.go         GET /payments/:no
//	HandlePaid        handle_paid.go         POST /payments/callback (the fix)
//	HandlePaidBroken  handle_paid_broken.go  POST /payments/callback (incident 2, broken)
//	Reconcile         reconcile.go           GET /admin/reconcile and the reconcile job
package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

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

// Waker is told that an outbox row was committed (the relay), so it
// publishes at once instead of at its next poll.
type Waker interface{ Wake() }

// Config tunes the use cases.
type Config struct {
	// NotifyURL is sent with each charge as the platform's notify address;
	// empty lets the platform use its own default.
	NotifyURL string
	// ReconcileLimit caps each list of the reconciliation report.
	ReconcileLimit int
	// SubjectPrefix is put before events.PaymentSucceeded. Production
	// leaves it empty; tests and the lab set a unique one so that their
	// streams never overlap another stream's subjects.
	SubjectPrefix string
}

// App is the payment service's use cases over their dependencies.
type App struct {
	store    payment.Store
	orders   Orders
	platform Platform
	waker    Waker
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
}

// New returns the use cases. waker may be nil (no relay running); orders and
// platform may be nil where only notifications are handled (the lab), and
// CreatePayment then fails.
func New(store payment.Store, orders Orders, platform Platform, waker Waker, cfg Config, log *slog.Logger) (*App, error) {
	if store == nil || log == nil {
		return nil, errors.New("app: store and logger are required")
	}
	if cfg.ReconcileLimit <= 0 {
		cfg.ReconcileLimit = 100
	}
	return &App{store: store, orders: orders, platform: platform, waker: waker, cfg: cfg, log: log,
		now: func() time.Time { return time.Now().UTC() }}, nil
}

func (a *App) wake() {
	if a.waker != nil {
		a.waker.Wake()
	}
}
