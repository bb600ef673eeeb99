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

	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/migrate"
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
		Migrations: []migrate.Source{migrations.Source},
		Logger:     log,
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

	// Serve until SIGTERM, then shut down in order.
	return rt.Serve(ctx)
}
