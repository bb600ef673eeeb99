// Command faultproxy runs the MySQL fault-injection proxy of incident 1 (the
// lost COMMIT acknowledgement): a TCP proxy in front of MySQL/MariaDB that,
// when armed through its admin API, lets the next COMMIT reach the server,
// drops the server's reply and cuts the client's connection. It can also
// cut the database off altogether until healed (an outage).
//
// Usage:
//
//	faultproxy        proxy FAULTPROXY_ADDR to FAULTPROXY_UPSTREAM until SIGTERM or SIGINT
//
// Admin API on FAULTPROXY_ADMIN_ADDR (bearer ADMIN_TOKEN except /healthz,
// /readyz and /metrics):
//
//	POST /arm     {"drop_commit_acks": 1}
//	POST /disarm
//	POST /cut     {"mode": "refuse"} or {"mode": "blackhole"}: close every session, refuse or hold new ones
//	POST /heal    end the cut
//	GET  /stats
//
// See pkg/lab/faultproxy for what the proxy can and cannot see.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/lab/faultproxy"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/metrics"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// `faultproxy healthcheck URL`: the compose healthcheck, in an image with no
	// shell or wget (pkg/httpserver.Healthcheck).
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		if err := httpserver.Healthcheck(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "faultproxy:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.LookupEnv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "faultproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, lookup config.LookupFunc, stdout io.Writer) error {
	// Configuration and logging.
	var cfg faultproxy.Config
	if err := config.LoadFrom(&cfg, lookup); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log, err := logging.New(stdout, "faultproxy", cfg.Log)
	if err != nil {
		return err
	}
	if cfg.AdminToken == faultproxy.DefaultConfig().AdminToken {
		log.Warn("ADMIN_TOKEN is the development default; set it outside local development")
	}

	// Metrics registry: the proxy's counters and the process's.
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterProcess(reg); err != nil {
		return err
	}

	// The proxy, then the admin API that arms it.
	proxy, err := faultproxy.New(cfg, log, reg)
	if err != nil {
		return err
	}
	if _, err := proxy.Listen(); err != nil {
		return err
	}
	admin, err := faultproxy.NewAdminServer(cfg, proxy, log, reg)
	if err != nil {
		proxy.Close()
		return err
	}
	adminDone, err := admin.Listen()
	if err != nil {
		proxy.Close()
		return err
	}

	// Serve until a signal, or until the admin server fails.
	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case serveErr = <-adminDone:
		serveErr = fmt.Errorf("admin server: %w", serveErr)
	}

	// Shutdown in reverse order: the admin API first, so nobody arms a proxy
	// that is going away, then the proxy, which cuts its connections.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(serveErr, admin.Shutdown(shutdownCtx), proxy.Close())
}
