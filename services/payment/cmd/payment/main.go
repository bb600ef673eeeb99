// Command payment runs the oncemall payment service.
//
// Usage:
//
//	payment                         serve HTTP and relay events until SIGTERM or SIGINT
//	payment migrate                 apply the database migrations and exit
//	payment outbox stats            print the outbox backlog as JSON
//	payment outbox redrive [id...]  put failed outbox messages (all, or the ids) back to pending
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	"github.com/oncemall/oncemall/services/payment/internal/httpapi"
	"github.com/oncemall/oncemall/services/payment/internal/jobs"
	"github.com/oncemall/oncemall/services/payment/internal/orderclient"
	"github.com/oncemall/oncemall/services/payment/internal/store"
	"github.com/oncemall/oncemall/services/payment/migrations"
	"github.com/oncemall/oncemall/services/payment/psp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "payment:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	// Configuration and logging.
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, "payment", cfg.Platform.Log)
	if err != nil {
		return err
	}
	opts := platform.Options{
		Service:    "payment",
		HTTPAddr:   cfg.HTTPAddr,
		DBName:     cfg.DBName,
		Migrations: []migrate.Source{migrations.Source, outbox.Migrations, idempotency.Migrations},
		Streams:    []jetstream.StreamConfig{events.StreamConfig(cfg.PaymentStream, cfg.SubjectPrefix+"payment")},
		Logger:     log,
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

	// Platform: MySQL (migrated), NATS JetStream with the PAYMENT stream,
	// Redis, HTTP server.
	rt, err := platform.Start(ctx, cfg.Platform, opts)
	if err != nil {
		return err
	}

	// Outbox relay: publishes payment.succeeded rows committed by the
	// callback handler. It starts first and stops after cron.
	relay, err := outbox.NewRelay(rt.DB, rt.NATS.JS, cfg.Outbox, log, rt.Registry)
	if err != nil {
		return errors.Join(fmt.Errorf("outbox relay: %w", err), rt.Shutdown(context.WithoutCancel(ctx)))
	}
	rt.Go("outbox relay", relay.Run)

	// Use cases over the store, the order service and the platform.
	a, err := app.New(
		store.New(rt.DB, store.Config{ReconcileLookback: cfg.ReconcileLookback, SubjectPrefix: cfg.SubjectPrefix}),
		orderclient.New(cfg.OrderURL, &http.Client{Timeout: cfg.OrderTimeout}),
		psp.NewClient(cfg.PSPURL, &http.Client{Timeout: cfg.PSPTimeout}),
		relay,
		app.Config{NotifyURL: cfg.PSPNotifyURL, SubjectPrefix: cfg.SubjectPrefix},
		log,
	)
	if err != nil {
		return errors.Join(err, rt.Shutdown(context.WithoutCancel(ctx)))
	}

	// Cron: the relay's safety-net poll and cleanup, and the reconciliation
	// job. Registered after the relay, so it stops before the relay.
	c := cron.New()
	reconcile, err := jobs.NewReconcile(a, log, rt.Registry)
	if err == nil {
		err = errors.Join(relay.Schedule(c), reconcile.Schedule(c, cfg.ReconcileSchedule))
	}
	if err != nil {
		return errors.Join(fmt.Errorf("cron: %w", err), rt.Shutdown(context.WithoutCancel(ctx)))
	}
	rt.StartCron("cron", c)

	// Idempotency-Key on POST /payments: Redis as the entry hint, the
	// database record as the truth, and its archiver on one replica at a
	// time. The archiver stops before the relay and after the HTTP server.
	idem, err := idempotency.New(rt.DB, rt.Redis, cfg.Idempotency, log, rt.Registry)
	if err != nil {
		return errors.Join(fmt.Errorf("idempotency: %w", err), rt.Shutdown(context.WithoutCancel(ctx)))
	}
	locks := redislock.New(rt.Redis, "payment:lock:")
	archiver, err := idempotency.NewArchiver(idem.Store(), locks, cfg.Idempotency, log, rt.Registry)
	if err == nil {
		err = archiver.Start(context.WithoutCancel(ctx))
	}
	if err != nil {
		return errors.Join(fmt.Errorf("idempotency archiver: %w", err), rt.Shutdown(context.WithoutCancel(ctx)))
	}
	rt.OnShutdown("idempotency archiver", archiver.Stop)

	// HTTP routes, with the optional entry lock in front of the callback,
	// and the outbox redrive behind the admin token.
	var callbackLock *redislock.Client
	if cfg.CallbackLock {
		callbackLock = locks
	}
	if err := httpapi.Register(rt.HTTP.Engine(), httpapi.Options{
		App:             a,
		Secret:          []byte(cfg.PSPSecret),
		SignatureWindow: cfg.SignatureWindow,
		CallbackMode:    cfg.CallbackMode,
		AdminToken:      cfg.Platform.AdminToken,
		Idempotency:     idem.Handler(),
		Lock:            callbackLock,
		LockTTL:         cfg.CallbackLockTTL,
		Registerer:      rt.Registry,
		Log:             log,
	}); err != nil {
		return errors.Join(err, rt.Shutdown(context.WithoutCancel(ctx)))
	}
	relay.MountRedrive(rt.HTTP.Engine(), cfg.Platform.AdminToken)

	// Serve until SIGTERM, then shut down in order: HTTP, idempotency
	// archiver, cron, relay, NATS, Redis, MySQL.
	return rt.Serve(ctx)
}
