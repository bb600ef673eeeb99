// Command psp-sim runs the payment-platform simulator on :8090 (PSP_HTTP_ADDR).
// It accepts charges, closes, queries and refunds from the payment service
// and calls back PSP_CALLBACK_URL and PSP_REFUND_CALLBACK_URL (or the
// request's notify_url) with signed notifications; see package pspsim for
// the modes and services/payment/README.md for the contract.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// `psp-sim healthcheck URL`: the compose healthcheck, in an image with no
	// shell or wget (pkg/httpserver.Healthcheck).
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		if err := httpserver.Healthcheck(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "psp-sim:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "psp-sim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout io.Writer) error {
	cfg, err := pspsim.Load()
	if err != nil {
		return err
	}
	if err := checkSecret(cfg.Secret, os.Getenv("ONCEMALL_ENV")); err != nil {
		return err
	}
	log, err := logging.New(stdout, "psp-sim", cfg.Log)
	if err != nil {
		return err
	}
	// Tracing first and flushed last, as the services do: a charge that
	// comes with a traceparent has its notifications delivered in its trace.
	tp, err := tracing.New(ctx, cfg.Tracing, "psp-sim")
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ferr := tp.Shutdown(fctx); ferr != nil {
			log.Warn("tracing: spans lost at shutdown", "err", ferr)
		}
	}()
	cfg.TracerProvider = tp.TracerProvider()
	sim, err := pspsim.New(cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	srv := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("psp simulator listening", "addr", ln.Addr().String(), "callback_url", cfg.CallbackURL, "mode", cfg.Mode, "retry_schedule", cfg.RetrySchedule)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return err
	}
	// Shutdown: stop taking charges, then stop pending deliveries.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	sim.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// checkSecret refuses a PSP_SECRET other than the published development
// one unless ONCEMALL_ENV=lab: the simulator signs whatever charge it is
// asked to, so with a real platform's secret it would forge that platform's
// notifications. Test rigs that give it a secret of their own say lab.
func checkSecret(secret, env string) error {
	var dev string
	for _, v := range config.Vars(&pspsim.Config{}) {
		if v.Name == "PSP_SECRET" {
			dev = v.Default
		}
	}
	if secret == dev || env == "lab" {
		return nil
	}
	return &config.Error{Var: "PSP_SECRET", Value: "<redacted>", Err: errors.New("not the development secret: the simulator signs any charge, so it runs with another secret only with ONCEMALL_ENV=lab")}
}
