// Package platform runs an oncemall service. A service declares what it is
// in a Service (name, port, migrations, streams, and a Wire function that
// builds its use cases and declares its routes, consumers and jobs); Main
// and Run do the rest: configuration and --help, the migrate and outbox
// commands, MySQL (created and migrated), NATS JetStream (streams
// declared), Redis, the outbox relay with its cleanup and redrive, the
// inbox consumers with theirs, the scheduled jobs (recovered, never
// overlapping, one replica at a time under a Redis lock), the HTTP server
// with health, readiness and metrics, tracing across all of them
// (TRACING_*), and the shutdown in reverse order.
//
// docs/service-shape.md shows a whole service built this way.
package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/metrics"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Options names what one service needs from the platform at start-up.
// Service.Run fills it from the declaration; tests of the platform itself
// call Start with it directly.
type Options struct {
	Service    string // "order", "coupon", "payment"
	Migrations []migrate.Source
	Streams    []jetstream.StreamConfig
	Logger     *slog.Logger
	// PriorityRoutes are the service's routes, beside /internal/, that
	// finish work already admitted (see Service.PriorityRoutes).
	PriorityRoutes []string
}

// InternalRoutes is the prefix of the routes other services call (guarded
// by Wiring.Internal). They are admitted as priority work: the caller holds
// a request of its own, already admitted, that waits on the answer.
const InternalRoutes = "/internal/"

// Runtime holds a started service's connections and server.
type Runtime struct {
	Config   Config
	Log      *slog.Logger
	DB       *gorm.DB
	NATS     *natsjs.Conn
	Redis    *redis.Client
	Registry *prometheus.Registry
	HTTP     *httpserver.Server
	// Tracing is the service's tracer provider (a no-op one with
	// TRACING_EXPORTER=none). It is set up first and shut down last, so
	// the spans of everything else, the relay's last publishes included,
	// are flushed.
	Tracing *tracing.Provider

	stops []stop
}

type stop struct {
	name string
	fn   func(context.Context) error
}

// Start opens every dependency, applies the migrations, declares the streams
// and builds the HTTP server (not yet listening). On error, whatever was
// opened is closed again.
func Start(ctx context.Context, cfg Config, opts Options) (_ *Runtime, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Runtime{Config: cfg, Log: opts.Logger, Registry: prometheus.NewRegistry()}
	if err := metrics.RegisterProcess(r.Registry); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.closeDeps()
			r.stopTracing(context.WithoutCancel(ctx))
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()

	// Tracing first: the HTTP server, the relay, the consumers and the jobs
	// all start their spans with it.
	if r.Tracing, err = tracing.New(ctx, cfg.Tracing, opts.Service); err != nil {
		return nil, err
	}

	// MySQL: the service's own database, created if missing, then migrated.
	if r.DB, err = openDB(ctx, cfg.MySQL, cfg.Database, r.Log); err != nil {
		return nil, err
	}
	if err = MigrateDB(ctx, r.DB, opts.Migrations); err != nil {
		return nil, err
	}
	r.Log.Info("database ready", "database", cfg.Database, "addr", cfg.MySQL.Addr)
	sqlDB, err := r.DB.DB()
	if err != nil {
		return nil, fmt.Errorf("database %s handle: %w", cfg.Database, err)
	}
	// go_sql_*: the pool's connections in use and the waits for one, which
	// the admission limit (HTTP_MAX_IN_FLIGHT) is sized to keep short.
	if _, err = metrics.Register(r.Registry, collectors.NewDBStatsCollector(sqlDB, cfg.Database)); err != nil {
		return nil, fmt.Errorf("database %s metrics: %w", cfg.Database, err)
	}

	// NATS JetStream: streams are declared idempotently by every replica.
	if r.NATS, err = natsjs.Connect(ctx, cfg.NATS, "oncemall-"+opts.Service, r.Log); err != nil {
		return nil, err
	}
	for _, sc := range opts.Streams {
		if _, err = natsjs.EnsureStream(ctx, r.NATS.JS, sc); err != nil {
			return nil, err
		}
	}
	r.Log.Info("nats ready", "url", natsjs.RedactURL(cfg.NATS.URL))

	// Redis: the entry layer. It is not required to start; /readyz reports it.
	r.Redis = redisclient.New(cfg.Redis)

	r.HTTP, err = httpserver.New(httpserver.Options{
		Addr:           cfg.HTTPAddr,
		Config:         cfg.HTTP,
		Logger:         r.Log,
		Registry:       r.Registry,
		Admission:      cfg.Admission,
		Priority:       append([]string{InternalRoutes}, opts.PriorityRoutes...),
		TracerProvider: r.Tracing.TracerProvider(),
		Checks: map[string]httpserver.Check{
			"mysql": func(ctx context.Context) error {
				sqlDB, err := r.DB.DB()
				if err != nil {
					return err
				}
				return sqlDB.PingContext(ctx)
			},
			"nats":  r.NATS.Ping,
			"redis": func(ctx context.Context) error { return r.Redis.Ping(ctx).Err() },
		},
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// openDB retries until MySQL answers or ctx ends, so the services can start
// before the database in compose. An error that no retry heals (refused
// credentials, see database.IsPermanent) is returned at once.
func openDB(ctx context.Context, cfg database.Config, name string, log *slog.Logger) (*gorm.DB, error) {
	for {
		db, err := database.Open(ctx, cfg, name, log)
		if err == nil {
			return db, nil
		}
		if database.IsPermanent(err) {
			return nil, err
		}
		log.Warn("database not ready, retrying", "addr", cfg.Addr, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// MigrateDB applies sources to db.
func MigrateDB(ctx context.Context, db *gorm.DB, sources []migrate.Source) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	if err := migrate.Up(ctx, sqlDB, sources...); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// OnShutdown registers fn to run at shutdown. Registered functions run in the
// reverse order of registration, after the HTTP server has stopped and before
// NATS, Redis and MySQL are closed and the spans flushed: register the relay,
// then cron, then the consumers, and they stop as consumers, cron, relay.
func (r *Runtime) OnShutdown(name string, fn func(context.Context) error) {
	r.stops = append(r.stops, stop{name, fn})
}

// Serve listens, blocks until ctx is cancelled (SIGTERM) or the server fails,
// then shuts down in order within ShutdownTimeout: HTTP server (in-flight
// requests finish), registered components in reverse, NATS drain, Redis, DB,
// and last the tracing, whose buffered spans are flushed.
func (r *Runtime) Serve(ctx context.Context) error {
	serveErr, err := r.HTTP.Listen()
	if err != nil {
		r.closeDeps()
		r.stopTracing(context.WithoutCancel(ctx))
		return err
	}
	r.Log.Info("service started")
	var runErr error
	select {
	case <-ctx.Done():
		r.Log.Info("shutdown requested")
	case runErr = <-serveErr:
		r.Log.Error("http server failed", "err", runErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), r.Config.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, r.Shutdown(sctx))
}

// Shutdown stops everything in order; see Serve.
func (r *Runtime) Shutdown(ctx context.Context) error {
	var errs []error
	if err := r.HTTP.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	}
	for i := len(r.stops) - 1; i >= 0; i-- {
		s := r.stops[i]
		if err := s.fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.name, err))
		}
		r.Log.Info("stopped", "component", s.name)
	}
	if r.NATS != nil {
		if err := r.NATS.Drain(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.closeDeps()
	// Last: every span has ended by now, the relay's final publishes too.
	if r.Tracing != nil {
		if err := r.Tracing.Shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	r.Log.Info("shutdown complete")
	return nil
}

// stopTracing flushes the spans of a start that failed, for a few seconds at
// most: they are what shows how far it got.
func (r *Runtime) stopTracing(ctx context.Context) {
	if r.Tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Tracing.Shutdown(ctx); err != nil {
		r.Log.Warn("tracing shutdown failed", "err", err)
	}
}

func (r *Runtime) closeDeps() {
	if r.NATS != nil {
		r.NATS.NC.Close()
	}
	if r.Redis != nil {
		_ = r.Redis.Close()
	}
	if r.DB != nil {
		_ = database.Close(r.DB)
	}
}

// MigrateOnly opens the service's database, applies its migrations and closes
// it: the `<service> migrate` command behind `make migrate`.
func MigrateOnly(ctx context.Context, cfg Config, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	db, err := openDB(ctx, cfg.MySQL, cfg.Database, opts.Logger)
	if err != nil {
		return err
	}
	defer database.Close(db)
	if err := MigrateDB(ctx, db, opts.Migrations); err != nil {
		return err
	}
	opts.Logger.Info("migrations applied", "database", cfg.Database)
	return nil
}

// Go runs fn in the background on a context of its own, not the signal's:
// relays and consumers must keep running while the HTTP server drains, and
// stop only when the ordered shutdown reaches them. The shutdown cancels the
// context and waits for fn to return. A component that dies on its own is
// logged at once; the service keeps serving and /readyz keeps reporting the
// dependencies.
func (r *Runtime) Go(name string, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := fn(ctx)
		if err != nil && ctx.Err() == nil {
			r.Log.Error("component stopped unexpectedly", "component", name, "err", err)
		}
		done <- err
	}()
	r.OnShutdown(name, func(sctx context.Context) error {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		case <-sctx.Done():
			return fmt.Errorf("did not stop in time: %w", sctx.Err())
		}
	})
}

// StartCron starts c and registers its stop, which waits for running jobs
// to finish (or the shutdown deadline).
func (r *Runtime) StartCron(name string, c *cron.Cron) {
	c.Start()
	r.OnShutdown(name, func(ctx context.Context) error {
		select {
		case <-c.Stop().Done():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}
