// Package assembly builds the coupon service: the use cases over the store,
// the order service's client, the routes, the consumers and the jobs. It is
// the only code that does; cmd/coupon's wire calls it with the lab's
// substitutions (none in production), tests and labs with their own.
package assembly

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/orderclient"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

// Definition is the service's platform definition with its Wire function.
// It publishes nothing: order.> is read from the order service's stream.
func Definition(wire func(*platform.Wiring, config.Config) error) platform.Service[config.Config] {
	return platform.Service[config.Config]{
		Name:       "coupon",
		Port:       8082,
		Migrations: []migrate.Source{migrations.Source},
		Streams:    []string{},
		Wire:       wire,
	}
}

// authTimeout bounds a fetch of the identity service's keys.
const authTimeout = 5 * time.Second

// Options are the substitutions a lab or a test may make; the zero value is
// production.
type Options struct {
	// Clock is the use cases' time (nil: the wall clock in UTC).
	Clock func() time.Time
	// Orders answers the lock sweeper about orders (nil: the order
	// service at ORDER_URL).
	Orders app.Orders
	// Deducer is incident 1's deduction (nil: the fixed one); the lab's
	// Plug sets the broken one in lab mode.
	Deducer app.CouponDeducer
	// Locks is incident 7's lock keeper (nil: the fixed one); the lab's
	// scenarios set the broken one.
	Locks app.LockKeeper
	// Store wraps the store the use cases run on, for a test's faults
	// between them and the database (nil: the store itself). Parts.Store
	// stays the unwrapped one.
	Store func(*store.Store) coupon.Store
	// Tx wraps the transaction the consumers hand the use cases (the
	// inbox's, viewed as a coupon.Tx), for a test's faults inside a
	// delivery (nil: the view itself).
	Tx func(coupon.Tx) coupon.Tx
	// Lab adds the lab's own operator routes once the service is built
	// (the console's switches; nil: none); admin is the credential check
	// of /admin.
	Lab func(w *platform.Wiring, admin gin.HandlerFunc, p *Parts)
}

// Parts are what a test or a lab may need after assembly.
type Parts struct {
	App   *app.App
	Store *store.Store
}

// Assemble builds the use cases on w's connections and declares the routes,
// the consumers (order.paid deducts, order.cancelled releases a lock) and
// the jobs (the retry pass over pending deductions, the lock sweeper, the
// reconciler).
func Assemble(w *platform.Wiring, cfg config.Config, o Options) (*Parts, error) {
	if o.Orders == nil {
		// Each call is a client span of the sweeper's trace and carries it on.
		o.Orders = orderclient.New(cfg.OrderURL, w.InternalToken, w.HTTPClient(cfg.OrderTimeout))
	}
	p, err := useCases(w.DB, cfg, o, w.Log, w.Registry, w.TracerProvider)
	if err != nil {
		return nil, err
	}
	// Customers and operators present the identity service's access tokens;
	// machines keep this service's ADMIN_TOKEN and INTERNAL_TOKEN.
	verifier, err := auth.NewVerifier(cfg.Auth, auth.Options{Client: w.HTTPClient(authTimeout), RefuseDevKey: !cfg.Env.Development()})
	if err != nil {
		return nil, err
	}
	admin := verifier.Operator(w.Log, w.Admin)
	api, err := httpapi.New(p.App, httpapi.Options{Log: w.Log, User: verifier.Middleware(w.Log),
		Admin: admin, Internal: w.Internal})
	if err != nil {
		return nil, err
	}
	w.Routes(api.Register)
	inboxTx := p.Store.InboxTx
	if o.Tx != nil {
		inboxTx = func(ctx context.Context, tx *gorm.DB) coupon.Tx { return o.Tx(p.Store.InboxTx(ctx, tx)) }
	}
	w.Consume(platform.Bind(inboxTx, messaging.OrderPaid(p.App)))
	w.Consume(platform.Bind(inboxTx, messaging.OrderCancelled(p.App)))
	w.Job(jobs.RetryPass(p.App, cfg.RetrySchedule, w.Log))
	w.Job(jobs.SweepLocks(p.App, cfg.SweepSchedule, w.Log))
	w.Job(jobs.Reconcile(p.App, cfg.ReconcileSchedule, w.Log))
	if o.Lab != nil {
		o.Lab(w, admin, p)
	}
	return p, nil
}

// UseCases builds the use cases over db as Assemble does, with no platform
// around them: for a lab scenario or a test that drives them itself on a
// database of its own (through a fault-injecting driver or proxy) and needs
// no route, consumer or job. o.Orders is required, since no ORDER_URL is
// called; tp starts the deductions' spans (nil: none).
func UseCases(db *gorm.DB, cfg config.Config, o Options, log *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Parts, error) {
	if o.Orders == nil {
		return nil, errors.New("assembly: UseCases needs Options.Orders")
	}
	return useCases(db, cfg, o, log, reg, tp)
}

func useCases(db *gorm.DB, cfg config.Config, o Options, log *slog.Logger, reg prometheus.Registerer, tp trace.TracerProvider) (*Parts, error) {
	st := store.New(db)
	var s coupon.Store = st
	if o.Store != nil {
		s = o.Store(st)
	}
	appCfg := cfg.App()
	appCfg.TracerProvider = tp
	appCfg.Clock = o.Clock
	appCfg.Deducer = o.Deducer
	appCfg.Locks = o.Locks
	a, err := app.New(s, o.Orders, appCfg, log, reg)
	if err != nil {
		return nil, err
	}
	return &Parts{App: a, Store: st}, nil
}
