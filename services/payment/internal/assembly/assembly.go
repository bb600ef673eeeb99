// Package assembly builds the payment service: its platform definition and
// Assemble, the one place where the app, the store, the peers, the routes,
// the consumer and the jobs are made and declared. main's wire() calls it
// with the lab's substitutions (if any); the tests and the lab call it with
// theirs.
package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/internal/httpapi"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/messaging"
	"github.com/oncemall/oncemall/services/payment/internal/orderclient"
	"github.com/oncemall/oncemall/services/payment/internal/store"
	"github.com/oncemall/oncemall/services/payment/migrations"
)

// Definition is the payment service's platform definition with its Wire
// function (nil where a test assembles it itself).
func Definition(wire func(*platform.Wiring, config.Config) error) platform.Service[config.Config] {
	return platform.Service[config.Config]{
		Name:       "payment",
		Port:       8083,
		Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
		Streams:    []string{"payment"}, // published; order.> is consumed from the order service's
		// The platform's notifications finish payments already charged:
		// under overload they are admitted ahead of new payments.
		PriorityRoutes: []string{"/payments/callback", "/payments/refunds/callback"},
		Wire:           wire,
	}
}

// PaidDeps are what a substituted notification handler runs on: the
// service's store, its database and the relay's Send for the events it
// writes outside the store.
type PaidDeps struct {
	Store *store.Store
	DB    *gorm.DB
	Send  func(...outbox.Message)
	Log   *slog.Logger
}

// authTimeout bounds a fetch of the identity service's keys.
const authTimeout = 5 * time.Second

// Options are the substitutions a lab or a test may make; the zero value is
// production.
type Options struct {
	// Clock is the use cases' clock; nil is time.Now in UTC.
	Clock func() time.Time
	// Paid builds the notification handler that replaces the fix: the
	// lab's broken one of incident 2 (lab.BrokenPaid). Nil is the fix.
	Paid func(PaidDeps) (app.PaidHandler, error)
	// Orders replaces the order service's client on ORDER_URL.
	Orders app.Orders
	// Platform replaces the payment platform's client on PSP_URL.
	Platform app.Platform
	// Locks replaces the callback entry lock's client (RedisLocks on the
	// service's Redis).
	Locks app.Locks
}

// Parts are what a test may need after assembly.
type Parts struct {
	App   *app.App
	Store *store.Store
	DB    *gorm.DB
}

// Assemble builds the payment service on w as cfg and o say, and declares
// its routes, consumer and jobs: the only place that does.
func Assemble(w *platform.Wiring, cfg config.Config, o Options) (*Parts, error) {
	st := store.New(w.DB, w.Outbox.Send)
	d := app.Deps{
		Store: st, Orders: o.Orders, Platform: o.Platform, Locks: o.Locks,
		Log: w.Log, Registry: w.Registry, Clock: o.Clock,
	}
	if d.Locks == nil {
		d.Locks = RedisLocks(w.Locks)
	}
	if d.Orders == nil {
		d.Orders = orderclient.New(cfg.OrderURL, w.InternalToken, w.HTTPClient(cfg.OrderTimeout))
	}
	if d.Platform == nil {
		d.Platform = psp.NewClient(cfg.PSPURL, w.HTTPClient(cfg.PSPTimeout))
	}
	if o.Paid != nil {
		paid, err := o.Paid(PaidDeps{Store: st, DB: w.DB, Send: w.Outbox.Send, Log: w.Log})
		if err != nil {
			return nil, err
		}
		d.Paid = paid
	}
	a, err := app.New(d, cfg.App())
	if err != nil {
		return nil, err
	}
	idem, err := w.Idempotency(cfg.Idempotency)
	if err != nil {
		return nil, err
	}
	// Customers and operators present the identity service's access tokens;
	// machines keep this service's ADMIN_TOKEN and INTERNAL_TOKEN.
	verifier, err := auth.NewVerifier(cfg.Auth, auth.Options{Client: w.HTTPClient(authTimeout), RefuseDevKey: !cfg.Env.Development()})
	if err != nil {
		return nil, err
	}
	api, err := httpapi.New(a, httpapi.Options{Log: w.Log, User: verifier.Middleware(w.Log), Admin: verifier.Operator(w.Log, w.Admin),
		Internal: w.Internal, Idempotency: idem.Handler(),
		Secret: []byte(cfg.PSPSecret), SignatureWindow: cfg.SignatureWindow, Registry: w.Registry, Now: o.Clock})
	if err != nil {
		return nil, err
	}
	w.Routes(api.Register)
	w.Consume(platform.Bind(st.InboxTx, messaging.OrderCancelled(a)))
	w.Job(jobs.Query(a, cfg.QuerySchedule, w.Log))
	w.Job(jobs.Refund(a, cfg.RefundSchedule, w.Log))
	w.Job(jobs.Reconcile(a, cfg.ReconcileSchedule, w.Log))
	return &Parts{App: a, Store: st, DB: w.DB}, nil
}

// RedisLocks is c as the app's Locks.
func RedisLocks(c *redislock.Client) app.Locks { return locks{c} }

type locks struct{ c *redislock.Client }

func (l locks) Acquire(ctx context.Context, name string, ttl time.Duration) (func(context.Context) error, error) {
	lock, err := l.c.Acquire(ctx, name, ttl)
	if errors.Is(err, redislock.ErrNotAcquired) {
		return nil, fmt.Errorf("%s: %w", name, app.ErrLockHeld)
	}
	if err != nil {
		return nil, err
	}
	return lock.Release, nil
}
