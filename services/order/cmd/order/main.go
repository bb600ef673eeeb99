// Command order runs the oncemall order service: orders and their payment,
// and the product catalog with its batch copy. `order --help` lists the
// commands and every variable; the platform (pkg/platform) runs the rest.
package main

import (
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "order",
	Port:       8081,
	Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
	Streams:    []string{"order", "payment", "product"}, // published; consumed; both (the batch copy)
	Wire:       wire,
}

func wire(w *platform.Wiring, cfg config.Config) error {
	orders, products := store.New(w.DB, w.Outbox.Wake), store.NewProducts(w.DB, w.Outbox.Wake)
	a, err := app.New(orders, products, cfg.App(), w.Log, w.Registry)
	if err != nil {
		return err
	}
	// POST /orders: the Idempotency-Key guard claims the key in the order's
	// transaction (store.CompleteInTx); one-time form tokens beside it.
	idem, err := w.Idempotency(cfg.Idempotency)
	if err != nil {
		return err
	}
	tokens, err := formtoken.New(w.Redis, cfg.FormTokens())
	if err != nil {
		return err
	}
	w.Routes(httpapi.New(a, httpapi.Options{
		Log: w.Log, Admin: w.Admin, Tokens: tokens, CompleteInTx: store.CompleteInTx,
		Guard: idem.HandlerInTxFor(string(cfg.Modes.OrderIdempotency)),
	}).Register)
	w.Consume(messaging.PaymentSucceeded(a, orders))
	w.Consume(messaging.ProductCopy(a, products, cfg.Modes.CopyWorkers(cfg.Products.Workers)))
	return nil
}
