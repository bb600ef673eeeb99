// Package assembly builds the order service: the one place that makes its
// app, stores, peers, routes, consumers and jobs. cmd/order's wire() calls
// it with the lab's substitutions (none in production); tests, labs and
// benchmarks call it with theirs.
package assembly

import (
	"context"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/jobs"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// Definition is the order service's platform definition with its Wire
// function (nil for a caller that assembles itself, as svctest does).
func Definition(wire func(*platform.Wiring, config.Config) error) platform.Service[config.Config] {
	return platform.Service[config.Config]{
		Name:       "order",
		Port:       8081,
		Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
		Streams:    []string{"order", "product"}, // published (product.> is also consumed: the batch copy)
		Wire:       wire,
	}
}

// authTimeout bounds a fetch of the identity service's keys.
const authTimeout = 5 * time.Second

// Options are the substitutions a lab or a test may make; the zero value is
// production. Each field is an interface or a func, nil meaning the
// production choice.
type Options struct {
	// Clock is the use cases' time (nil: the system clock).
	Clock func() time.Time
	// Stock takes an order's units (incident 5; nil: app.FixedStock).
	Stock app.StockReserver
	// Products creates products (incident 3; nil: app.KeyedProducts).
	Products app.ProductCreator
	// CopyWorkers overrides PRODUCT_COPY_WORKERS for the batch-copy
	// consumer (zero: the setting).
	CopyWorkers int
	// Charges closes an order's charge before the order is closed
	// (incident 6; nil: the payment service at PAYMENT_URL).
	Charges app.Payments
	// Guard is POST /orders' entry guard made from the service's
	// Idempotency-Key middleware (incident 4; nil: its HandlerInTx, the key
	// claimed in the order's transaction).
	Guard func(*idempotency.Middleware, *slog.Logger) gin.HandlerFunc
	// Numbers numbers the orders (incident 7; nil: app.KeyedOrderNumbers,
	// one number per Idempotency-Key).
	Numbers app.OrderNumbers
	// CompleteInTx wraps store.CompleteInTx, the Idempotency-Key record's
	// completion inside the order's transaction: a test fails it or holds
	// the transaction there (nil: store.CompleteInTx as is).
	CompleteInTx func(next Complete) Complete
	// Lab adds the lab's own operator routes once the service is built
	// (the console's switches; nil: none); admin is the credential check
	// of /admin.
	Lab func(w *platform.Wiring, admin gin.HandlerFunc, p *Parts)
}

// Complete completes POST /orders' Idempotency-Key record inside the
// order's transaction with the response about to be sent.
type Complete = func(ctx context.Context, tx order.Tx, status int, body []byte) error

// Parts are what a test or a lab may need after assembly.
type Parts struct {
	App      *app.App
	Orders   *store.Store
	Products *store.Products
}

// Assemble builds the app, stores, peers, routes, consumers and jobs on w
// with o's substitutions: the only place that does.
func Assemble(w *platform.Wiring, cfg config.Config, o Options) (*Parts, error) {
	orders, products := store.New(w.DB, w.Outbox.Send), store.NewProducts(w.DB, w.Outbox.Send)
	coupons := couponclient.New(cfg.Peers.CouponURL, w.InternalToken, w.HTTPClient(cfg.Peers.CouponTimeout))
	var payments app.Payments = paymentclient.New(cfg.Peers.PaymentURL, w.InternalToken, w.HTTPClient(cfg.Peers.PaymentTimeout))
	if o.Charges != nil {
		payments = o.Charges
	}
	a, err := app.New(orders, products, coupons, payments, app.Choices{Stock: o.Stock, Products: o.Products, Numbers: o.Numbers, Clock: o.Clock}, cfg.App(), w.Log, w.Registry)
	if err != nil {
		return nil, err
	}
	// POST /orders claims its Idempotency-Key in the order's transaction.
	idem, err := w.Idempotency(cfg.Idempotency)
	if err != nil {
		return nil, err
	}
	tokens, err := formtoken.New(w.Redis, cfg.FormTokens())
	if err != nil {
		return nil, err
	}
	guard, complete := idem.HandlerInTx(), Complete(store.CompleteInTx)
	if o.CompleteInTx != nil {
		complete = o.CompleteInTx(complete)
	}
	if o.Guard != nil {
		guard = o.Guard(idem, w.Log)
	}
	// Customers and operators present the identity service's access tokens;
	// machines keep this service's ADMIN_TOKEN and INTERNAL_TOKEN.
	verifier, err := auth.NewVerifier(cfg.Auth, auth.Options{Client: w.HTTPClient(authTimeout), RefuseDevKey: !cfg.Env.Development()})
	if err != nil {
		return nil, err
	}
	admin := verifier.Operator(w.Log, w.Admin)
	api, err := httpapi.New(a, httpapi.Options{Log: w.Log, User: verifier.Middleware(w.Log), Admin: admin,
		Internal: w.Internal, Tokens: tokens,
		CompleteInTx: complete, Guard: guard})
	if err != nil {
		return nil, err
	}
	w.Routes(api.Register)
	workers := cfg.Products.Workers
	if o.CopyWorkers > 0 {
		workers = o.CopyWorkers
	}
	w.Consume(platform.Bind(orders.InboxTx, messaging.PaymentSucceeded(a)))
	w.Consume(platform.Bind(products.InboxTx, messaging.ProductCopy(a, workers)))
	w.Job(jobs.Close(a, cfg.Orders.CloseSchedule, w.Log))
	w.Job(jobs.Reconcile(a, cfg.Orders.ReconcileSchedule, w.Log))
	parts := &Parts{App: a, Orders: orders, Products: products}
	if o.Lab != nil {
		o.Lab(w, admin, parts)
	}
	return parts, nil
}
