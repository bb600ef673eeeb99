// Command coupon runs the oncemall coupon service: coupons, the locks orders
// take on them, and their deduction for the orders paid with them
// (incident 1). `coupon --help` lists the commands and every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/orderclient"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "coupon",
	Port:       8082,
	Migrations: []migrate.Source{migrations.Source},
	Streams:    []string{}, // it publishes nothing; order.> is consumed from the order service's
	Wire:       wire,
}

// wire builds the use cases over the platform's connections and the order
// service's client, and declares the routes, the consumers (order.paid
// deducts, order.cancelled releases a lock), and the jobs that retry the
// deductions left pending, sweep overdue locks and reconcile.
func wire(w *platform.Wiring, cfg config.Config) error {
	st := store.New(w.DB)
	// Each call is a client span of the sweeper's trace and carries it on.
	orders := orderclient.New(cfg.OrderURL, w.InternalToken, w.HTTPClient(cfg.OrderTimeout))
	appCfg := cfg.App()
	appCfg.TracerProvider = w.TracerProvider
	a, err := app.New(st, orders, appCfg, w.Log, w.Registry)
	if err != nil {
		return err
	}
	w.Routes(httpapi.New(a, httpapi.Options{Log: w.Log, Admin: w.Admin, Internal: w.Internal}).Register)
	w.Consume(messaging.OrderPaid(a, st))
	w.Consume(messaging.OrderCancelled(a, st))
	w.Job(jobs.RetryPass(a, cfg.RetrySchedule, w.Log))
	w.Job(jobs.SweepLocks(a, cfg.SweepSchedule, w.Log))
	w.Job(jobs.Reconcile(a, cfg.ReconcileSchedule, w.Log))
	return nil
}
