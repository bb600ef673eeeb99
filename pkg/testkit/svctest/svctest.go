// Package svctest runs a whole service in process for a test, assembled by
// the service's own assembly function with the test's substitutions, so a
// test exercises what production runs and nothing wired by hand.
//
//	cfg := svctest.Config(t, service, map[string]string{"COUPON_URL": coupons.URL})
//	parts, base := svctest.Start(t, service, cfg, func(w *platform.Wiring, cfg config.Config) (*order.Parts, error) {
//		return order.Assemble(w, cfg, order.Options{Clock: clock})
//	})
package svctest

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// Config loads s's configuration for one test from Vars(t, s, vars,
// consumes...). It fails the test when the configuration is refused.
func Config[C platform.Settings](t testing.TB, s platform.Service[C], vars map[string]string, consumes ...string) C {
	t.Helper()
	return Load(t, s, Vars(t, s, vars, consumes...))
}

// Load loads s's configuration from the environment env, failing the test
// when it is refused.
func Load[C platform.Settings](t testing.TB, s platform.Service[C], env map[string]string) C {
	t.Helper()
	cfg, err := s.Load(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		t.Fatalf("%s configuration: %v", s.Name, err)
	}
	return cfg
}

// Vars are the environment of s for one test: a throwaway database, the
// test's NATS and Redis, a free address, ONCEMALL_ENV=lab, and an event
// prefix of the test's own, under which s's streams and those of the
// services it consumes from (consumes: "order", "payment") are deleted when
// the test ends; vars are set on top (peer URLs, modes, schedules). A test
// that runs the service's binary hands them to its process.
func Vars[C platform.Settings](t testing.TB, s platform.Service[C], vars map[string]string, consumes ...string) map[string]string {
	t.Helper()
	mysqlCfg, dbName := testenv.NewDatabase(t)
	env := testenv.Config(t)
	ev := events.Config{SubjectPrefix: strings.ToLower(testenv.UniqueName(t, s.Name)) + "."}
	conn := testenv.NATS(t)
	for _, root := range s.Streams {
		testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName(root))
	}
	testenv.PublishersStreams(t, conn.JS, ev, consumes...)
	set := map[string]string{
		"ONCEMALL_ENV": "lab", "EVENT_SUBJECT_PREFIX": ev.SubjectPrefix, "HTTP_ADDR": testenv.FreeAddr(t),
		"MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_USER": mysqlCfg.User, "MYSQL_PASSWORD": mysqlCfg.Password, "MYSQL_DATABASE": dbName,
		"NATS_URL": env.NATS.URL, "REDIS_ADDR": env.Redis.Addr, "REDIS_PASSWORD": env.Redis.Password,
		// A job's Redis lock is named alike in every process of a service
		// on this Redis; a short expiry bounds what a killed test holds.
		"JOB_LOCK_TTL": "5s", "SHUTDOWN_TIMEOUT": "10s",
	}
	maps.Copy(set, vars)
	return set
}

// Start builds s on cfg (platform.Build), hands the wiring to assemble (the
// service's own assembly, with the test's substitutions), serves what it
// declared until the test ends, and waits until /readyz answers. It returns
// what assemble returned and the service's base URL.
func Start[C platform.Settings, P any](t testing.TB, s platform.Service[C], cfg C, assemble func(*platform.Wiring, C) (P, error)) (P, string) {
	t.Helper()
	w, err := platform.Build(context.Background(), s, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatalf("build %s: %v", s.Name, err)
	}
	parts, err := assemble(w, cfg)
	if err != nil {
		t.Fatalf("assemble %s: %v", s.Name, err)
	}
	base := "http://" + cfg.Shared().HTTPAddr
	testenv.Serve(t, w.Serve, base)
	return parts, base
}

// Consumer is the inbox consumer name that w's service declared, as the
// platform built and runs it (platform.Wiring.Consumer), for a test that
// hands it deliveries of its own; the test fails when it runs none.
func Consumer(t testing.TB, w *platform.Wiring, name string) *inbox.Consumer {
	t.Helper()
	c := w.Consumer(name)
	if c == nil {
		t.Fatalf("the service runs no consumer %s", name)
	}
	return c
}
