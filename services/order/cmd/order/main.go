// Command order runs the oncemall order service.
//
// Usage:
//
//	order           serve HTTP and consume events until SIGTERM or SIGINT
//	order migrate   apply the database migrations and exit
package main

import (
	"context"
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
	"github.com/oncemall/oncemall/services/order/internal/config"
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
		Migrations: []migrate.Source{migrations.Source, outbox.Migrations, inbox.Migrations},
		Streams: []jetstream.StreamConfig{
			// Products: batch-copy chunks (incident 3).
			events.StreamConfig(cfg.Products.Stream, cfg.Products.SubjectPrefix),
		},
		Logger: log,
	}
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return platform.MigrateOnly(ctx, cfg.Platform, opts)
		default:
			return fmt.Errorf("unknown command %q (want no argument, or \"migrate\")", args[0])
		}
	}

	// Platform: MySQL (migrated), NATS JetStream, Redis, HTTP server.
	rt, err := platform.Start(ctx, cfg.Platform, opts)
	if err != nil {
		return err
	}

	// Outbox relay: publishes this database's local_message rows, woken
	// after each commit that queued messages and by a cron safety-net poll.
	relay, err := outbox.NewRelay(rt.DB, rt.NATS.JS, outbox.Config{}, log, rt.Registry)
	if err != nil {
		return err
	}
	runUntilShutdown(ctx, rt, "outbox relay", relay.Run)
	jobs := cron.New()
	if err := relay.Schedule(jobs); err != nil {
		return err
	}
	jobs.Start()
	rt.OnShutdown("cron", func(context.Context) error { <-jobs.Stop().Done(); return nil })

	// Products: catalog and batch copy (incident 3), see products.go.
	if err := startProducts(ctx, rt, cfg.Products, relay); err != nil {
		return err
	}

	// Serve until SIGTERM, then shut down in order.
	return rt.Serve(ctx)
}
