// Command web runs the oncemall storefront on :8085: server-rendered pages
// over the services' public APIs (sign-in at identity, the catalog and
// orders at order, coupons, payments through the platform). It owns no
// data. `web --help` lists the commands and every variable.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/web/internal/assembly"
	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/lab"
)

// program is the storefront; Port is HTTP_ADDR's default (config.Config).
var program = assembly.Program{
	Name: "web",
	Port: 8085,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "web:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	command := ""
	if len(args) > 0 {
		command = args[0]
	}
	switch command {
	case "help", "-h", "-help", "--help":
		return help(stdout)
	case "healthcheck":
		return httpserver.Healthcheck(ctx, args[1:])
	case "":
	default:
		return fmt.Errorf("unknown command %q (try web --help)", command)
	}
	cfg, err := config.Load(os.LookupEnv)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, program.Name, cfg.Log)
	if err != nil {
		return err
	}
	// Tracing first and flushed last: every page's calls are spans of its
	// trace.
	tp, err := tracing.New(ctx, cfg.Tracing, program.Name)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(fctx); err != nil {
			log.Warn("tracing: spans lost at shutdown", "err", err)
		}
	}()
	return wire(ctx, cfg, log, tp)
}

// wire builds the storefront and serves it until ctx ends.
func wire(ctx context.Context, cfg config.Config, log *slog.Logger, tp *tracing.Provider) error {
	var o assembly.Options
	if err := lab.Plug(&o, cfg, os.LookupEnv); err != nil { // lab mode's incident switches; a fork deletes this line and lab/
		return err
	}
	srv, err := assembly.Assemble(cfg, log, tp.TracerProvider(), o)
	if err != nil {
		return err
	}
	serveErr, err := srv.Listen()
	if err != nil {
		return err
	}
	log.Info("storefront started", "order_url", cfg.OrderURL, "identity_url", cfg.IdentityURL, "brand", cfg.Brand)
	select {
	case <-ctx.Done():
		log.Info("shutdown requested")
	case err := <-serveErr:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func help(w io.Writer) error {
	fmt.Fprint(w, "Usage: web [command]\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  (none)\tserve the storefront until SIGTERM or SIGINT\n")
	fmt.Fprintf(tw, "  healthcheck URL\tGET URL (its own /readyz) and exit 0 on a 2xx answer: a container healthcheck needing no shell\n")
	fmt.Fprintf(tw, "  help\tprint this help\n")
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprint(w, "\nEnvironment (variable, default, meaning):\n")
	for _, v := range vars() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, v.Default, v.Usage)
	}
	return tw.Flush()
}

// vars are every variable the program reads: the storefront's, and the
// lab's, read in lab mode only (a fork that deletes lab/ drops them here
// too).
func vars() []pkgconfig.Var {
	return append(pkgconfig.Vars(&config.Config{}), pkgconfig.Vars(&lab.Config{})...)
}
