// Package coupontest is the coupon service's test support: the whole service
// in process for one test, built by internal/assembly through
// pkg/testkit/svctest, with the test's substitutions.
//
//	svc := coupontest.Start(t, map[string]string{"COUPON_RETRY_SCHEDULE": "@every 1h"}, assembly.Options{Orders: orders})
//	svc.App.IssueCoupon(ctx, ...)
//
// Settings is its configuration for a test that builds the use cases alone
// through assembly.UseCases.
package coupontest

import (
	"context"
	"encoding/json"
	"maps"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

// Service is a running coupon service.
type Service struct {
	*assembly.Parts
	// URL is its base URL.
	URL    string
	Config config.Config
	// Declared is what its assembly declared: routes, consumers, jobs.
	Declared platform.Declarations
	// Issuer is the identity service its customer's and operator's routes
	// trust: cfg.Auth is set to it.
	Issuer *authtest.Issuer
	// Registry is its metrics registry, what /metrics serves.
	Registry *prometheus.Registry

	wiring *platform.Wiring
}

// Config is the service's configuration for t (svctest.Config, with the
// order service's stream declared for its consumers) and vars on top.
func Config(t testing.TB, vars map[string]string) config.Config {
	t.Helper()
	return svctest.Config(t, assembly.Definition(nil), vars, "order")
}

// Settings is the service's configuration with vars over its defaults
// (ONCEMALL_ENV=lab), validated as the service validates it when it
// starts, with nothing made for it: for a test of the use cases alone
// (assembly.UseCases over a database of the test's own).
func Settings(t testing.TB, vars map[string]string) config.Config {
	t.Helper()
	env := map[string]string{"ONCEMALL_ENV": "lab"}
	maps.Copy(env, vars)
	return svctest.Load(t, assembly.Definition(nil), env)
}

// Start runs the coupon service on Config(t, vars), assembled with o, until
// t ends.
func Start(t testing.TB, vars map[string]string, o assembly.Options) *Service {
	t.Helper()
	return StartWith(t, Config(t, vars), o)
}

// StartWith runs the coupon service on cfg, assembled with o, until t ends.
func StartWith(t testing.TB, cfg config.Config, o assembly.Options) *Service {
	t.Helper()
	s := &Service{Issuer: authtest.New(t)}
	cfg.Auth = s.Issuer.Config()
	s.Config = cfg
	s.Parts, s.URL = svctest.Start(t, assembly.Definition(nil), cfg, func(w *platform.Wiring, cfg config.Config) (*assembly.Parts, error) {
		p, err := assembly.Assemble(w, cfg, o)
		s.Declared, s.Registry, s.wiring = w.Declared(), w.Registry, w
		return p, err
	})
	return s
}

// Consumer is the service's running inbox consumer name, as its assembly
// declared it (svctest.Consumer).
func (s *Service) Consumer(t testing.TB, name string) *inbox.Consumer {
	t.Helper()
	return svctest.Consumer(t, s.wiring, name)
}

// DB is the service's database.
func (s *Service) DB() *gorm.DB { return s.Store.DB() }

// Publish publishes event (marshalled as JSON, or as is when it is []byte)
// on the service's subject under the message id id, as the order service's
// relay would.
func (s *Service) Publish(t testing.TB, subject, id string, event any) {
	t.Helper()
	body, ok := event.([]byte)
	if !ok {
		var err error
		body, err = json.Marshal(event)
		testenv.Must(t, err)
	}
	_, err := testenv.NATS(t).JS.Publish(context.Background(), s.Config.Events.Subject(subject), body, jetstream.WithMsgID(id))
	testenv.Must(t, err)
}

// Count counts the rows of table matching where.
func (s *Service) Count(t testing.TB, table, where string, args ...any) int {
	t.Helper()
	var n int64
	testenv.Must(t, s.DB().Table(table).Where(where, args...).Count(&n).Error)
	return int(n)
}
