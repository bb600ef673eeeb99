package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/redislock"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Consumer declares an inbox consumer of one event: each message is
// deduplicated by its Nats-Msg-Id in the handler's own transaction (see
// inbox.Consumer.Process for the handler's contract).
type Consumer struct {
	// Name is the durable consumer name and the deduplication scope.
	Name string
	// Subject is the event consumed (events.OrderPaid); the platform puts
	// EVENT_SUBJECT_PREFIX before it and reads it from its stream.
	Subject string
	// Handle applies one message inside the transaction it is given.
	Handle inbox.Handler
	// Workers overrides INBOX_WORKERS for this consumer (zero: the setting).
	Workers int
	// Backoff overrides the inbox's redelivery delays (nil: its defaults).
	Backoff []time.Duration
}

// ConsumerOf declares a consumer as a messaging package writes it: its
// handler works on T, the service's own view of the inbox's transaction
// (the domain's Tx), so the package needs to know nothing of the database
// behind it. Bind turns it into a Consumer with the store that makes that
// view.
type ConsumerOf[T any] struct {
	Name    string
	Subject string
	// Handle applies one message inside the transaction it is given (see
	// inbox.Consumer.Process for the contract; inbox.JSON decodes).
	Handle  func(ctx context.Context, tx T, msg inbox.Message) error
	Workers int
	Backoff []time.Duration
}

// Bind is c with its transaction made by bind: every store's InboxTx(ctx,
// tx), which views the inbox's transaction as the domain's Tx.
func Bind[T any](bind func(ctx context.Context, tx *gorm.DB) T, c ConsumerOf[T]) Consumer {
	return Consumer{Name: c.Name, Subject: c.Subject, Workers: c.Workers, Backoff: c.Backoff,
		Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			return c.Handle(ctx, bind(ctx, tx), msg)
		},
	}
}

// Wiring is what a service's Wire function builds on: the started
// connections, the outbox relay, and the declarations of what the platform
// runs once Wire returns. Declarations take effect only if Wire returns nil.
type Wiring struct {
	Log      *slog.Logger
	DB       *gorm.DB
	Redis    *redis.Client
	NATS     *natsjs.Conn
	Registry *prometheus.Registry
	// Outbox is the service's relay. Use cases write rows with outbox.Add
	// inside their transactions and hand the same messages to Outbox.Send
	// after the commit.
	Outbox *outbox.Relay
	// Admin guards operator routes with the ADMIN_TOKEN bearer token.
	Admin gin.HandlerFunc
	// Internal guards the routes other services call (/internal/…) with
	// the INTERNAL_TOKEN bearer token; InternalToken is what this service
	// presents when it calls theirs.
	Internal      gin.HandlerFunc
	InternalToken string
	// Locks takes Redis locks under the service's prefix
	// ("oncemall:<EVENT_SUBJECT_PREFIX><service>:lock:"), the same the jobs
	// use.
	Locks *redislock.Client
	// TracerProvider is the service's (TRACING_*), for the spans the
	// platform does not start itself: a span around work of the service's
	// own. The routes, consumers, jobs and relay are traced already, and so
	// are the calls of the clients HTTPClient returns.
	TracerProvider trace.TracerProvider

	rt        *Runtime
	cfg       Config
	sched     *scheduler
	routes    []func(gin.IRouter)
	consumers []Consumer
	jobs      []Job
	goes      []component

	mu      sync.Mutex
	running map[string]*inbox.Consumer // the consumers built, by name
}

// HTTPClient returns a client for calls to another service or a platform,
// each bounded by timeout (keep it below the request's deadline), each a
// client span of the caller's trace that carries the trace and the request
// id on. Its connections are kept for reuse PeerIdleConns per host, not
// net/http's default of 2: a service calls few hosts, many requests at a
// time, and a new connection per call is most of a loopback call's cost.
func (w *Wiring) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: tracing.Transport(w.TracerProvider, peerTransport)}
}

// PeerIdleConns is how many idle connections HTTPClient's clients keep per
// host.
const PeerIdleConns = 64

// peerTransport is the transport every HTTPClient shares: net/http's
// default with PeerIdleConns idle connections per host.
var peerTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * PeerIdleConns
	t.MaxIdleConnsPerHost = PeerIdleConns
	return t
}()

type component struct {
	name string
	run  func(context.Context) error
}

func newWiring(name string, rt *Runtime, cfg Config) (*Wiring, error) {
	tp := rt.Tracing.TracerProvider()
	relayCfg := cfg.Outbox
	relayCfg.SubjectPrefix = cfg.Events.SubjectPrefix
	relayCfg.TracerProvider = tp
	relay, err := outbox.NewRelay(rt.DB, rt.NATS.JS, relayCfg, rt.Log, rt.Registry)
	if err != nil {
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	// The lock keys carry the event namespace too, so two deployments (or
	// two test runs) sharing a Redis never hold each other's job locks or
	// claim each other's intervals.
	locks := redislock.New(rt.Redis, "oncemall:"+cfg.Events.SubjectPrefix+name+":lock:")
	sched, err := newScheduler(locks, cfg.Jobs.LockTTL, rt.Log, rt.Registry, tp)
	if err != nil {
		return nil, err
	}
	return &Wiring{
		Log: rt.Log, DB: rt.DB, Redis: rt.Redis, NATS: rt.NATS, Registry: rt.Registry,
		Outbox: relay, Admin: httpserver.AdminAuth(cfg.AdminToken), Locks: locks,
		Internal: httpserver.AdminAuth(cfg.InternalToken), InternalToken: cfg.InternalToken,
		TracerProvider: tp, rt: rt, cfg: cfg, sched: sched,
	}, nil
}

// Serve starts what was declared on w (the relay, the jobs, the components,
// the consumers, the routes) and serves until ctx ends, then shuts it all
// down in reverse order. If something declared cannot start, everything is
// shut down and the error returned.
func (w *Wiring) Serve(ctx context.Context) error {
	if err := w.start(); err != nil {
		return errors.Join(err, w.rt.Shutdown(context.WithoutCancel(ctx)))
	}
	return w.rt.Serve(ctx)
}

// Declarations is what a Wire function declared, in a form two assemblies
// can be compared by: each entry one string, sorted.
type Declarations struct {
	Routes     []string // "POST /orders"
	Consumers  []string // "coupon-order-paid order.paid"
	Jobs       []string // "coupon-sweep @every 1m"
	Components []string // the names of what Go declared
}

// Declared lists what has been declared on w so far. The routes are those
// the Routes functions register on a router of their own, so listing them
// mounts nothing.
func (w *Wiring) Declared() Declarations {
	var d Declarations
	e := gin.New()
	for _, register := range w.routes {
		register(e)
	}
	for _, r := range e.Routes() {
		d.Routes = append(d.Routes, r.Method+" "+r.Path)
	}
	for _, c := range w.consumers {
		d.Consumers = append(d.Consumers, c.Name+" "+c.Subject)
	}
	for _, j := range w.jobs {
		d.Jobs = append(d.Jobs, j.Name+" "+j.Schedule)
	}
	for _, g := range w.goes {
		d.Components = append(d.Components, g.name)
	}
	for _, l := range [][]string{d.Routes, d.Consumers, d.Jobs, d.Components} {
		slices.Sort(l)
	}
	return d
}

// Routes declares HTTP routes: register is called with the server's router.
func (w *Wiring) Routes(register func(r gin.IRouter)) { w.routes = append(w.routes, register) }

// Consume declares an inbox consumer.
func (w *Wiring) Consume(c Consumer) { w.consumers = append(w.consumers, c) }

// Job declares a scheduled job.
func (w *Wiring) Job(j Job) { w.jobs = append(w.jobs, j) }

// Go declares a background component: run starts before the HTTP server
// listens and is cancelled at shutdown, after the consumers and the jobs
// have stopped and before the relay.
func (w *Wiring) Go(name string, run func(context.Context) error) {
	w.goes = append(w.goes, component{name, run})
}

// Idempotency returns the Idempotency-Key middleware over the service's
// database and Redis, and declares its archiver as a job. The service must
// list idempotency.Migrations among its migrations.
func (w *Wiring) Idempotency(cfg idempotency.Config) (*idempotency.Middleware, error) {
	m, err := idempotency.New(w.DB, w.Redis, cfg, w.Log, w.Registry)
	if err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	archiver, err := idempotency.NewArchiver(m.Store(), cfg, w.Log, w.Registry)
	if err != nil {
		return nil, fmt.Errorf("idempotency archiver: %w", err)
	}
	w.Job(Job{Name: "idempotency-archive", Schedule: cfg.ArchiveSchedule, Run: func(ctx context.Context) error {
		n, err := archiver.RunOnce(ctx)
		if n > 0 {
			w.Log.Info("idempotency records archived", "deleted", n)
		}
		return err
	}})
	return m, nil
}

// start builds what Wire declared and starts it in order: the relay, the
// jobs, the components, the consumers; then it mounts the routes. The
// shutdown runs in reverse (see Runtime.OnShutdown).
func (w *Wiring) start() error {
	// A consumer reads a stream its publisher declares. Until that
	// service has started once, the stream does not exist: the consumer
	// waits for it in the background rather than failing the start-up, so
	// the services start in any order and none needs rights on another's
	// stream.
	var consumers, waiting []inbox.Config
	handlers := map[string]inbox.Handler{}
	for _, c := range w.consumers {
		cfg := w.cfg.Inbox.Config(c.Name, w.cfg.Events.StreamName(c.Subject), w.cfg.Events.Subject(c.Subject))
		if c.Workers > 0 {
			cfg.Workers = c.Workers
		}
		cfg.Backoff = c.Backoff
		cfg.TracerProvider = w.TracerProvider
		handlers[c.Name] = c.Handle
		consumers = append(consumers, cfg)
	}
	ready := make(map[string]*inbox.Consumer, len(consumers))
	for _, cfg := range consumers {
		consumer, err := inbox.NewConsumer(w.DB, w.NATS.JS, cfg, handlers[cfg.Name], w.Log, w.Registry)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			waiting = append(waiting, cfg)
		case err != nil:
			return fmt.Errorf("consumer %s: %w", cfg.Name, err)
		default:
			ready[cfg.Name] = consumer
			w.built(consumer)
		}
	}
	jobs := append([]Job{
		{Name: "outbox-poll", Schedule: w.cfg.Outbox.PollSchedule, Run: w.Outbox.Poll, EveryReplica: true, untraced: true},
		{Name: "outbox-cleanup", Schedule: w.cfg.Outbox.CleanupSchedule, Run: w.cleanOutbox},
		{Name: "inbox-cleanup", Schedule: w.cfg.Inbox.CleanupSchedule, Run: w.cleanInbox},
	}, w.jobs...)
	var errs []error
	for _, j := range jobs {
		errs = append(errs, w.sched.add(j))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	engine := w.rt.HTTP.Engine()
	for _, register := range w.routes {
		register(engine)
	}
	w.Outbox.MountRedrive(engine, w.cfg.AdminToken)
	httpserver.MountPprof(engine, w.Admin)

	// Started relay → jobs → components → consumers, so that they stop
	// consumers → components → jobs → relay: what the consumers commit
	// last still gets its events published.
	w.rt.Go("outbox relay", w.Outbox.Run)
	w.sched.start()
	w.rt.OnShutdown("jobs", w.sched.stop)
	for _, g := range w.goes {
		w.rt.Go(g.name, g.run)
	}
	for _, cfg := range consumers {
		if c, ok := ready[cfg.Name]; ok {
			w.rt.Go("consumer "+cfg.Name, c.Run)
		}
	}
	for _, cfg := range waiting {
		w.rt.Go("consumer "+cfg.Name, w.awaitStream(cfg, handlers[cfg.Name]))
	}
	return nil
}

func (w *Wiring) cleanOutbox(ctx context.Context) error {
	_, err := w.Outbox.Cleanup(ctx)
	return err
}

func (w *Wiring) cleanInbox(ctx context.Context) error {
	n, err := inbox.Cleanup(ctx, w.DB, w.cfg.Inbox)
	if n.Processed+n.Refused+n.Dead > 0 {
		w.Log.Info("inbox cleanup", "processed_deleted", n.Processed, "refused_deleted", n.Refused, "dead_deleted", n.Dead)
	}
	return err
}

// Handler is the service's HTTP handler, every middleware included, for a
// benchmark that serves requests in process; the routes are mounted once
// Serve has started.
func (w *Wiring) Handler() http.Handler { return w.rt.HTTP.Handler() }

// Events is the service's event namespace (EVENT_SUBJECT_PREFIX).
func (w *Wiring) Events() events.Config { return w.cfg.Events }

// Consumer returns the consumer Consume declared under name as the
// platform built and runs it, for a test that hands it deliveries of its
// own (Process) beside those it pulls: nil before Serve has started it, or
// while it waits for its stream.
func (w *Wiring) Consumer(name string) *inbox.Consumer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[name]
}

func (w *Wiring) built(c *inbox.Consumer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running == nil {
		w.running = map[string]*inbox.Consumer{}
	}
	w.running[c.Name()] = c
}

// awaitStream returns a component that declares the consumer cfg once its
// stream exists, trying every second, and then runs it.
func (w *Wiring) awaitStream(cfg inbox.Config, h inbox.Handler) func(context.Context) error {
	return func(ctx context.Context) error {
		w.Log.Warn("consumer waiting for its stream, which the publishing service declares when it starts",
			"consumer", cfg.Name, "stream", cfg.Stream)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			c, err := inbox.NewConsumer(w.DB, w.NATS.JS, cfg, h, w.Log, w.Registry)
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound):
				continue
			case err != nil:
				return fmt.Errorf("consumer %s: %w", cfg.Name, err)
			}
			w.Log.Info("consumer attached to its stream", "consumer", cfg.Name, "stream", cfg.Stream)
			w.built(c)
			return c.Run(ctx)
		}
	}
}
