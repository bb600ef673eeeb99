// Package assembly builds the storefront: the one place where its client of
// the services, its session verifier, its pages and its HTTP server are
// made. main's wire() calls it; a test that needs a substitution passes it
// in Options.
package assembly

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/tracing"
	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

// Program is how the storefront declares itself: its name (logs, traces)
// and its port, HTTP_ADDR's default.
type Program struct {
	Name string
	Port int
}

// Options are the substitutions a test may make; the zero value is
// production.
type Options struct {
	// Shop replaces the client of the services.
	Shop pages.Shop
	// Verifier replaces the verifier of AUTH_ISSUER's tokens.
	Verifier pages.Verifier
	// Console adds sections to the operator's console (lab mode's incident
	// switches, services/web/lab), each made with the storefront's client
	// of the services and its HTTP client (traced, with the upstream
	// timeout).
	Console []func(client *upstream.Client, hc *http.Client) pages.Section
	// WrapShop, when set, wraps what the pages call (lab mode's double
	// submit, services/web/lab).
	WrapShop func(pages.Shop) pages.Shop
}

// Assemble builds the storefront as cfg and o say: its server, with the
// pages registered, not yet listening.
func Assemble(cfg config.Config, log *slog.Logger, tp trace.TracerProvider, o Options) (*httpserver.Server, error) {
	reg := prometheus.NewRegistry()
	if err := metrics.RegisterProcess(reg); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: cfg.Timeout, Transport: tracing.Transport(tp, http.DefaultTransport)}
	client, err := upstream.New(upstream.URLs{Identity: cfg.IdentityURL, Order: cfg.OrderURL, Coupon: cfg.CouponURL,
		Payment: cfg.PaymentURL, PSP: cfg.PSPURL}, hc, reg)
	if err != nil {
		return nil, err
	}
	if o.Shop == nil {
		o.Shop = client
	}
	if o.WrapShop != nil {
		o.Shop = o.WrapShop(o.Shop)
	}
	if o.Verifier == nil {
		v, err := auth.NewVerifier(cfg.Auth, auth.Options{Client: hc, RefuseDevKey: !cfg.Env.Development()})
		if err != nil {
			return nil, err
		}
		o.Verifier = v
	}
	var sections []pages.Section
	for _, section := range o.Console {
		sections = append(sections, section(client, hc))
	}
	p, err := pages.New(o.Shop, o.Verifier, pages.Options{Log: log, Brand: cfg.Brand,
		CookieKey: []byte(cfg.CookieKey), CookieSecure: cfg.CookieSecure, Operator: client, Sections: sections})
	if err != nil {
		return nil, err
	}
	// Ready when the services it cannot show a page without answer:
	// identity (sign-in, the keys) and order (the catalog).
	check := func(service, base string) httpserver.Check {
		return func(ctx context.Context) error { return client.Healthy(ctx, service, base) }
	}
	srv, err := httpserver.New(httpserver.Options{
		Addr: cfg.HTTPAddr, Config: cfg.HTTP, Logger: log, Registry: reg, TracerProvider: tp,
		Checks: map[string]httpserver.Check{"identity": check("identity", cfg.IdentityURL), "order": check("order", cfg.OrderURL)},
	})
	if err != nil {
		return nil, err
	}
	p.Register(srv.Engine())
	return srv, nil
}
