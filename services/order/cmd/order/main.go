// Command order runs the oncemall order service: orders priced from the
// catalog, their stock reserved and their coupon locked, paid, cancelled or
// closed; the catalog and its batch copy. `order --help` lists every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/lab/idempotencylab"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/couponclient"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/jobs"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/paymentclient"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "order",
	Port:       8081,
	Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
	Streams:    []string{"order", "product"}, // published (product.> is also consumed: the batch copy)
	Wire:       wire,
}

func wire(w *platform.Wiring, cfg config.Config) error {
	orders, products := store.New(w.DB, w.Outbox.Send), store.NewProducts(w.DB, w.Outbox.Send)
	coupons := couponclient.New(cfg.Peers.CouponURL, w.InternalToken, w.HTTPClient(cfg.Peers.CouponTimeout))
	payments := paymentclient.New(cfg.Peers.PaymentURL, w.InternalToken, w.HTTPClient(cfg.Peers.PaymentTimeout))
	a, err := app.New(orders, products, coupons, payments, cfg.App(), w.Log, w.Registry)
	if err != nil {
		return err
	}
	// POST /orders claims its Idempotency-Key in the order's transaction.
	idem, err := w.Idempotency(cfg.Idempotency)
	if err != nil {
		return err
	}
	tokens, err := formtoken.New(w.Redis, cfg.FormTokens())
	if err != nil {
		return err
	}
	guard := idem.HandlerInTx()
	if cfg.Modes.OrderIdempotency == variant.Broken { // lab mode only (config refuses it elsewhere)
		guard = idempotencylab.BrokenCheckThenAct(idem, w.Log)
	}
	w.Routes(httpapi.New(a, httpapi.Options{Log: w.Log, Admin: w.Admin, Internal: w.Internal, Tokens: tokens,
		CompleteInTx: store.CompleteInTx, Guard: guard}).Register)
	w.Consume(messaging.PaymentSucceeded(a, orders))
	w.Consume(messaging.ProductCopy(a, products, cfg.Modes.CopyWorkers(cfg.Products.Workers)))
	w.Job(jobs.Close(a, cfg.Orders.CloseSchedule, w.Log))
	w.Job(jobs.Reconcile(a, cfg.Orders.ReconcileSchedule, w.Log))
	return nil
}
