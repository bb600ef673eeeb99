// Command coupon runs the oncemall coupon service: coupons, their deduction
// for the orders paid with them (incident 1), and the coupon.used event.
// `coupon --help` lists the commands and every variable.
package main

import (
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func main() { platform.Main(service) }

var service = platform.Service[config.Config]{
	Name:       "coupon",
	Port:       8082,
	Migrations: []migrate.Source{migrations.Source},
	Streams:    []string{"coupon", "order"}, // published, consumed
	Wire:       wire,
}

// wire builds the use cases over the platform's connections and declares
// the routes, the order.paid consumer that lands messages, and the jobs that
// deduct them and archive the notification records.
func wire(w *platform.Wiring, cfg config.Config) error {
	st := store.New(w.DB, w.Outbox.Wake)
	a, err := app.New(st, cfg.App(), w.Log, w.Registry)
	if err != nil {
		return err
	}
	w.Routes(httpapi.New(a, httpapi.Options{Log: w.Log, Admin: w.Admin}).Register)
	w.Consume(messaging.OrderPaid(a, st))
	w.Job(jobs.RetryPass(a, cfg.RetrySchedule, w.Log))
	w.Job(jobs.ArchiveRecords(a, cfg.ArchiveSchedule, w.Log))
	return nil
}
