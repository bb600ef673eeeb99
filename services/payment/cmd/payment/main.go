// Command payment runs the oncemall payment service: payments, the platform's notifications
// (incident 2), closed charges, queries and late refunds. `payment --help` lists variables.
package main

import (
	"context"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/internal/httpapi"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/messaging"
	"github.com/oncemall/oncemall/services/payment/internal/orderclient"
	"github.com/oncemall/oncemall/services/payment/internal/store"
	"github.com/oncemall/oncemall/services/payment/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "payment",
	Port:       8083,
	Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
	Streams:    []string{"payment"}, // published; order.> is consumed from the order service's
	// The platform's notifications finish payments already charged: under
	// overload they are admitted ahead of new payments.
	PriorityRoutes: []string{"/payments/callback", "/payments/refunds/callback"},
	Wire:           wire,
}

func wire(w *platform.Wiring, cfg config.Config) error {
	orders := orderclient.New(cfg.OrderURL, w.InternalToken, w.HTTPClient(cfg.OrderTimeout))
	charges := psp.NewClient(cfg.PSPURL, w.HTTPClient(cfg.PSPTimeout))
	st := store.New(w.DB, w.Outbox.Send)
	a, err := app.New(st, orders, charges, w.Locks, cfg.App(), w.Log, w.Registry)
	if err != nil {
		return err
	}
	if err := a.Check(context.Background()); err != nil {
		return err
	}
	idem, err := w.Idempotency(cfg.Idempotency)
	if err != nil {
		return err
	}
	api, err := httpapi.New(a, httpapi.Options{Log: w.Log, Admin: w.Admin, Internal: w.Internal, Idempotency: idem.Handler(),
		Secret: []byte(cfg.PSPSecret), SignatureWindow: cfg.SignatureWindow, Registry: w.Registry})
	if err != nil {
		return err
	}
	w.Routes(api.Register)
	w.Consume(messaging.OrderCancelled(a, st))
	w.Job(jobs.Query(a, cfg.QuerySchedule, w.Log))
	w.Job(jobs.Refund(a, cfg.RefundSchedule, w.Log))
	w.Job(jobs.Reconcile(a, cfg.ReconcileSchedule, w.Log))
	return nil
}
