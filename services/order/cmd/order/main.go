// Command order runs the oncemall order service.
//
// Usage:
//
//	order                         serve HTTP and consume events until SIGTERM or SIGINT
//	order migrate                 apply the database migrations and exit
//	order outbox stats            print the outbox backlog as JSON
//	order outbox redrive [id...]  put failed outbox messages (all, or the ids) back to pending
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gin-gonic/gin"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "order:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	// Configuration and logging.
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, "order", cfg.Platform.Log)
	if err != nil {
		return err
	}
	opts := platform.Options{
		Service:    "order",
		HTTPAddr:   cfg.HTTPAddr,
		DBName:     cfg.DBName,
		Migrations: []migrate.Source{migrations.Source, outbox.Migrations, inbox.Migrations, idempotency.Migrations},
		// ORDER is the stream this service publishes to. PAYMENT is
		// declared too (with the identical shared config, so it is
		// idempotent) because the payment.succeeded consumer needs it to
		// exist whichever service starts first.
		Streams: []jetstream.StreamConfig{
			events.StreamConfig(cfg.Events.OrderStream, cfg.Events.SubjectPrefix+"order"),
			events.StreamConfig(cfg.Events.PaymentStream, cfg.Events.SubjectPrefix+"payment"),
			// Products: batch-copy chunks, published and consumed here (incident 3).
			events.StreamConfig(cfg.Products.Stream, cfg.Products.SubjectPrefix),
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
	fail := func(err error) error {
		return errors.Join(err, rt.Shutdown(context.Background()))
	}

	// Outbox relay: publishes order.created and order.paid.
	relay, err := outbox.NewRelay(rt.DB, rt.NATS.JS, cfg.Outbox, log, rt.Registry)
	if err != nil {
		return fail(err)
	}

	// Entry layer for POST /orders: the Idempotency-Key middleware (Redis
	// front, database truth, completed in the order's own transaction) and
	// the one-time form token of GET /orders/token.
	idem, err := idempotency.New(rt.DB, rt.Redis, cfg.Idempotency, log, rt.Registry)
	if err != nil {
		return fail(fmt.Errorf("idempotency: %w", err))
	}
	if cfg.IdempotencyGuard == idempotency.GuardBroken {
		log.Warn("ORDER_IDEMPOTENCY_GUARD=broken: check-then-act lets concurrent retries create duplicate orders (incident 4); for the lab only")
	}
	archiver, err := idempotency.NewArchiver(idem.Store(), redislock.New(rt.Redis, "order:lock:"), cfg.Idempotency, log, rt.Registry)
	if err != nil {
		return fail(fmt.Errorf("idempotency archiver: %w", err))
	}
	tokens, err := formtoken.New(rt.Redis, formtoken.Config{Prefix: "order:formtoken:", TTL: cfg.FormTokenTTL})
	if err != nil {
		return fail(err)
	}

	// Use cases and HTTP routes.
	orders := app.New(store.New(rt.DB), relay, log).WithSubjectPrefix(cfg.Events.SubjectPrefix).WithReconcileLookback(cfg.Outbox.Retention)
	httpapi.New(orders, log, httpapi.Options{
		CompleteInTx: idempotency.CompleteInTx,
		Entry:        []gin.HandlerFunc{idem.HandlerInTxFor(cfg.IdempotencyGuard), tokens.Require(httpapi.UserIDHeader, false)},
		IssueToken:   tokens.IssueHandler(httpapi.UserIDHeader),
		AdminToken:   cfg.Platform.AdminToken,
	}).Register(rt.HTTP.Engine())
	relay.MountRedrive(rt.HTTP.Engine(), cfg.Platform.AdminToken)

	// Consumer of payment.succeeded: marks orders paid.
	paid := messaging.NewPaymentSucceeded(orders, relay, log)
	consumer, err := inbox.NewConsumer(rt.DB, rt.NATS.JS,
		cfg.Inbox.Config(app.PaymentSucceededConsumer, cfg.Events.PaymentStream, cfg.Events.SubjectPrefix+events.PaymentSucceeded),
		paid.Handle, log, rt.Registry)
	if err != nil {
		return fail(err)
	}

	// Background components, registered relay → cron → consumer so that
	// shutdown stops them consumer → cron → relay: the consumer's last
	// commits still get their order.paid rows published.
	rt.Go("outbox relay", relay.Run)
	jobs := cron.New()
	if err := relay.Schedule(jobs); err != nil {
		return fail(err)
	}
	if err := archiver.Start(context.WithoutCancel(ctx)); err != nil {
		return fail(err)
	}
	rt.OnShutdown("idempotency archiver", archiver.Stop)
	rt.StartCron("cron", jobs)
	rt.Go("payment.succeeded consumer", consumer.Run)

	// Products: catalog routes and the batch-copy consumer (incident 3),
	// see products.go. Registered after cron like the other consumer.
	copier, err := startProducts(rt, cfg.Products, cfg.Inbox, relay)
	if err != nil {
		return fail(err)
	}
	rt.Go("product copy consumer", copier.Run)

	// Serve until SIGTERM, then shut down in order.
	return rt.Serve(ctx)
}
