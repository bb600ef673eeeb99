// Package paymenttest runs the payment service in process for a test, as
// main runs it: svctest's Build, the lab's part when the test passes one
// (its schema and its Plug, as main's wire calls it), and
// assembly.Assemble with the test's substitutions. It is the one test
// support of the service; nothing here wires the service by hand, and it
// does not import the lab, so a fork that deletes lab/ keeps it.
package paymenttest

import (
	"log/slog"
	"maps"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/assembly"
	"github.com/oncemall/oncemall/services/payment/internal/config"
)

// AdminToken guards the test service's /admin routes, InternalToken its
// /internal ones.
const (
	AdminToken    = "test-admin-token"
	InternalToken = "test-internal-token"
)

// Config says how to run the service.
type Config struct {
	// Mode is PAYMENT_CALLBACK_MODE ("" is fixed): broken needs Lab.
	Mode variant.Mode
	// Lab is the lab's part of the assembly (none when zero).
	Lab Lab
	// Vars are set on top of the test's settings (ORDER_URL, PSP_URL,
	// PAYMENT_CALLBACK_LOCK, the query and refund settings, ...). The
	// jobs' schedules default to never: a test runs the use cases itself.
	Vars map[string]string
	// Options are further substitutions (a lock client, a clock).
	Options assembly.Options
	// Log, when set, also receives everything the service logs.
	Log slog.Handler
}

// Lab is what the service's lab adds to it: a schema applied after the
// service's migrations (the broken handler's table) and the Plug main's
// wire calls (paymentlab.Schema and paymentlab.Plug).
type Lab struct {
	Schema *migrate.Source
	Plug   func(*assembly.Options, config.Config)
}

// Service is the running service.
type Service struct {
	*assembly.Parts
	// URL is its base URL; CallbackURL and RefundCallbackURL its
	// notification addresses, sent as notify_url with its charges and
	// refunds.
	URL, CallbackURL, RefundCallbackURL string
	// Registry holds its metrics.
	Registry *prometheus.Registry
	// Locks is its lock client (the callback entry lock's).
	Locks *redislock.Client
	// Config is the configuration it runs with.
	Config config.Config
	// Issuer is the identity service its customer's and operator's routes
	// trust (AUTH_ISSUER): Token mints a customer's bearer.
	Issuer *authtest.Issuer
}

// Token is a customer's access token for user, from the service's issuer.
func (s *Service) Token(t testing.TB, user uint64) string {
	t.Helper()
	return s.Issuer.Token(t, user, auth.RoleCustomer)
}

// Start runs the service until the test ends, on a database of the test's
// own (with c.Lab's schema applied when set), and returns it once ready.
func Start(t testing.TB, c Config) *Service {
	t.Helper()
	addr := testenv.FreeAddr(t)
	iss := authtest.New(t)
	vars := map[string]string{
		"AUTH_ISSUER": iss.URL, "AUTH_AUDIENCE": authtest.Audience,
		"HTTP_ADDR": addr, "ADMIN_TOKEN": AdminToken, "INTERNAL_TOKEN": InternalToken,
		"PSP_NOTIFY_URL": "http://" + addr + "/payments/callback", "PSP_REFUND_NOTIFY_URL": "http://" + addr + "/payments/refunds/callback",
		// The tests race many requests at once: admission control is
		// pkg/httpserver's to test, not theirs.
		"HTTP_MAX_IN_FLIGHT":     "0",
		"PAYMENT_QUERY_SCHEDULE": Never, "PAYMENT_REFUND_SCHEDULE": Never, "PAYMENT_RECONCILE_SCHEDULE": Never,
	}
	if c.Mode != "" {
		vars["PAYMENT_CALLBACK_MODE"] = string(c.Mode)
	}
	maps.Copy(vars, c.Vars)
	svc := assembly.Definition(nil)
	cfg := svctest.Config(t, svc, vars, "order")
	s := &Service{Config: cfg, Issuer: iss}
	s.Parts, s.URL = svctest.Start(t, svc, cfg, func(w *platform.Wiring, cfg config.Config) (*assembly.Parts, error) {
		if c.Lab.Schema != nil {
			sqlDB, err := w.DB.DB()
			if err != nil {
				return nil, err
			}
			if err := migrate.Up(t.Context(), sqlDB, *c.Lab.Schema); err != nil {
				return nil, err
			}
		}
		if c.Log != nil {
			w.Log = slog.New(slog.NewMultiHandler(w.Log.Handler(), c.Log))
		}
		s.Registry, s.Locks = w.Registry, w.Locks
		o := c.Options
		if c.Lab.Plug != nil {
			c.Lab.Plug(&o, cfg)
		}
		return assembly.Assemble(w, cfg, o)
	})
	s.CallbackURL, s.RefundCallbackURL = s.URL+"/payments/callback", s.URL+"/payments/refunds/callback"
	return s
}

// Never is a job schedule that does not come round in a test.
const Never = "@every 10000h"
