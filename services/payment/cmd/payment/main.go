// Command payment runs the oncemall payment service: payments for orders,
// the payment platform's "paid" notifications (incident 2), the close of an
// order's charge, the active query, refunds of payments that landed after
// their order closed, and their reconciliation. `payment --help` lists its
// commands and variables.
package main

import (
	"context"
	"net/http"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/internal/httpapi"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/messaging"
	"github.com/oncemall/oncemall/services/payment/internal/orderclient"
	"github.com/oncemall/oncemall/services/payment/internal/store"
	"github.com/oncemall/oncemall/services/payment/migrations"
	"github.com/oncemall/oncemall/services/payment/psp"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "payment",
	Port:       8083,
	Migrations: []migrate.Source{migrations.Source, idempotency.Migrations},
	Streams:    []string{"payment"}, // published; order.> is consumed from the order service's
	Wire:       wire,
}

func wire(w *platform.Wiring, cfg config.Config) error {
	// Each call is a client span of the caller's trace and carries it on,
	// to the platform too, whose notifications come back in that trace.
	traced := tracing.Transport(w.TracerProvider, http.DefaultTransport)
	orders := orderclient.New(cfg.OrderURL, w.InternalToken, &http.Client{Timeout: cfg.OrderTimeout, Transport: traced})
	charges := psp.NewClient(cfg.PSPURL, &http.Client{Timeout: cfg.PSPTimeout, Transport: traced})
	st := store.New(w.DB, w.Outbox.Wake)
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
