// Command coupon runs the oncemall coupon service.
//
// Usage:
//
//	coupon                         serve HTTP and consume events until SIGTERM or SIGINT
//	coupon migrate                 apply the database migrations and exit
//	coupon outbox stats            print the outbox backlog as JSON
//	coupon outbox redrive [id...]  put failed outbox messages (all, or the ids) back to pending
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/coupon/internal/app"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
	"github.com/oncemall/oncemall/services/coupon/internal/httpapi"
	"github.com/oncemall/oncemall/services/coupon/internal/jobs"
	"github.com/oncemall/oncemall/services/coupon/internal/messaging"
	"github.com/oncemall/oncemall/services/coupon/internal/store"
	"github.com/oncemall/oncemall/services/coupon/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "coupon:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	// Configuration and logging.
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, "coupon", cfg.Platform.Log)
	if err != nil {
		return err
	}
	opts := platform.Options{
		Service:  "coupon",
		HTTPAddr: cfg.HTTPAddr,
		DBName:   cfg.DBName,
		// The coupon tables, the outbox (coupon.used) and the inbox
		// (order.paid deduplication) share the service's database, so each
		// is written in the same transaction as the business change.
		Migrations: []migrate.Source{migrations.Source, outbox.Migrations, inbox.Migrations},
		// The order stream is the order service's; declaring it here too
		// (idempotently) lets the coupon service start first.
		Streams: []jetstream.StreamConfig{
			events.StreamConfig(cfg.OrderStream, cfg.OrderStreamSubj),
			events.StreamConfig(cfg.EventStream, cfg.EventStreamSubj),
		},
		Logger: log,
	}
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return platform.MigrateOnly(ctx, cfg.Platform, opts)
		case "outbox":
			return outbox.Command(ctx, cfg.Platform.MySQL, cfg.DBName, log, args[1:], stdout)
		default:
			return fmt.Errorf("unknown command %q (want no argument, \"migrate\" or \"outbox\")", args[0])
		}
	}

	// Platform: MySQL (migrated), NATS JetStream, Redis, HTTP server.
	rt, err := platform.Start(ctx, cfg.Platform, opts)
	if err != nil {
		return err
	}
	if cfg.DeductionMode == "broken" {
		log.Warn("COUPON_DEDUCTION_MODE=broken: running the incident 1 deduction that deducts twice on a lost COMMIT ack; lab use only")
	}

	// Outbox relay: publishes coupon.used. Registered first, so it stops
	// last, after everything that writes to the outbox.
	relay, err := outbox.NewRelay(rt.DB, rt.NATS.JS, cfg.Outbox, log, rt.Registry)
	if err != nil {
		return errors.Join(err, rt.Shutdown(context.Background()))
	}
	rt.Go("outbox relay", relay.Run)

	// Use cases and HTTP routes, with the outbox redrive behind the admin
	// token.
	st := store.New(rt.DB).WithEventPrefix(cfg.EventStreamSubj)
	a, err := app.New(st, relay.Wake, cfg.App(), log, rt.Registry)
	if err != nil {
		return errors.Join(err, rt.Shutdown(context.Background()))
	}
	httpapi.Register(rt.HTTP.Engine(), a, cfg.Platform.AdminToken, log)
	relay.MountRedrive(rt.HTTP.Engine(), cfg.Platform.AdminToken)

	// Cron: the retry pass over coupon_message and the record archive, one
	// replica at a time under a Redis lock, plus the relay's safety-net poll
	// and cleanup, and the inbox's cleanup of processed ids (on the archive
	// schedule; a batched DELETE that any number of replicas may run).
	locks := redislock.New(rt.Redis, "oncemall:lock:")
	inboxCleanup := func(c *cron.Cron) error {
		_, err := c.AddFunc(cfg.ArchiveSchedule, func() {
			n, err := inbox.CleanupProcessed(ctx, rt.DB, cfg.InboxRetention, cfg.ArchiveBatch)
			if err != nil {
				log.Error("inbox cleanup failed", "deleted", n, "err", err)
			} else if n > 0 {
				log.Info("inbox cleanup", "deleted", n)
			}
		})
		return err
	}
	sched, err := jobs.New(a, cfg.Jobs(), locks, log, relay.Schedule, inboxCleanup)
	if err != nil {
		return errors.Join(err, rt.Shutdown(context.Background()))
	}
	sched.Start()
	rt.OnShutdown("cron", sched.Stop)

	// order.paid consumer: lands events in coupon_message. Registered last,
	// so it stops first and no event lands while cron is stopping.
	orderPaid := cfg.OrderStreamSubj + ".paid" // events.OrderPaid with the default prefix
	consumer, err := inbox.NewConsumer(rt.DB, rt.NATS.JS, inbox.Config{
		Name:           cfg.ConsumerName,
		Stream:         cfg.OrderStream,
		FilterSubjects: []string{orderPaid},
		Workers:        cfg.ConsumerWorkers,
		MaxDeliver:     cfg.ConsumerDeliver,
		AckWait:        cfg.ConsumerAckWait,
	}, messaging.OrderPaidHandler(a, st, orderPaid), log, rt.Registry)
	if err != nil {
		return errors.Join(err, rt.Shutdown(context.Background()))
	}
	rt.Go("order.paid consumer", consumer.Run)

	// Serve until SIGTERM, then shut down in order: HTTP, consumer, cron,
	// relay, NATS, Redis, MySQL.
	return rt.Serve(ctx)
}
