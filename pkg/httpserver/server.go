// Package httpserver builds the gin HTTP server every service runs:
// admission control (a bounded number of requests in flight, the rest
// refused early with 503 and a jittered Retry-After), request ids, tracing,
// JSON access logs, Prometheus metrics, panic recovery, a request body
// limit, problem+json errors, and the /healthz, /readyz and /metrics
// endpoints.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Config is the HTTP part of a service configuration. Addr is declared by each
// service, because its default port differs.
type Config struct {
	BodyLimitBytes    int64         `env:"HTTP_BODY_LIMIT_BYTES" default:"1048576" usage:"largest request body accepted (bytes)"`
	ReadHeaderTimeout time.Duration `env:"HTTP_READ_HEADER_TIMEOUT" default:"5s" usage:"time allowed to read request headers"`
	// ReadTimeout bounds the whole request read, body included, so a client
	// that trickles its body cannot hold a handler (and its database
	// connection) for longer.
	ReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT" default:"10s" usage:"time allowed to read a whole request, body included; a slower body fails with 408"`
	// RequestTimeout is every request's deadline: the handler's context ends
	// then, its database and network calls fail, and the client gets 503.
	RequestTimeout time.Duration `env:"HTTP_REQUEST_TIMEOUT" default:"10s" usage:"deadline of every request's handling; past it the handler's context ends and the answer is 503"`
	WriteTimeout   time.Duration `env:"HTTP_WRITE_TIMEOUT" default:"30s" usage:"time allowed to write a response (keep it above HTTP_REQUEST_TIMEOUT)"`
}

// Validate reports unusable settings, each naming its variable.
func (c Config) Validate() error {
	var errs []error
	bad := func(name string, v time.Duration, why string) {
		errs = append(errs, &config.Error{Var: name, Value: v.String(), Err: errors.New(why)})
	}
	if c.BodyLimitBytes <= 0 {
		errs = append(errs, &config.Error{Var: "HTTP_BODY_LIMIT_BYTES", Value: fmt.Sprint(c.BodyLimitBytes), Err: errors.New("must be positive")})
	}
	if c.ReadHeaderTimeout <= 0 {
		bad("HTTP_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout, "must be positive")
	}
	if c.ReadTimeout < c.ReadHeaderTimeout {
		bad("HTTP_READ_TIMEOUT", c.ReadTimeout, "must be at least HTTP_READ_HEADER_TIMEOUT")
	}
	if c.RequestTimeout <= 0 {
		bad("HTTP_REQUEST_TIMEOUT", c.RequestTimeout, "must be positive")
	}
	if c.WriteTimeout <= c.RequestTimeout {
		bad("HTTP_WRITE_TIMEOUT", c.WriteTimeout, "must be above HTTP_REQUEST_TIMEOUT, or a late answer cannot be written")
	}
	return errors.Join(errs...)
}

// Check reports whether one dependency is usable.
type Check func(ctx context.Context) error

// Options wires a Server.
type Options struct {
	Addr   string
	Config Config
	Logger *slog.Logger
	// Registry is where the server's metrics are registered and what
	// /metrics serves; required.
	Registry *prometheus.Registry
	// Checks are run by /readyz, each with a short timeout; the map key names
	// the dependency in the 503 answer ("mysql", "nats", "redis").
	Checks map[string]Check
	// Admission bounds the requests in flight (zero: no bound) and sets the
	// Retry-After range of every 503.
	Admission AdmissionConfig
	// Priority lists route prefixes, as registered ("/internal/",
	// "/payments/callback"), whose requests finish work already admitted
	// somewhere: they may take the slots AdmissionConfig.PriorityReserve
	// keeps from new work, and a freed slot goes to them first.
	Priority []string
	// TracerProvider serves every request but the probes in a server span
	// named after its route, continuing the caller's trace, with the request
	// id as an attribute and in the trace's baggage. When tracing is off
	// (nil or a no-op provider, see tracing.Enabled) the tracing middleware
	// is not installed at all.
	TracerProvider trace.TracerProvider
}

// Server is a service's HTTP server.
type Server struct {
	engine *gin.Engine
	srv    *http.Server
	log    *slog.Logger
	retry  retryRange
}

// New returns a server with the standard middleware and endpoints installed;
// the service adds its own routes to Engine(). Servers built on one
// Registry share their metrics; a metric of the same name registered there
// otherwise (other labels, another type) is an error.
func New(opts Options) (*Server, error) {
	if opts.Registry == nil {
		return nil, errors.New("http server: no metrics registry")
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("http server metrics: %w", err)
	}
	adm, err := newAdmission(opts.Admission, opts.Priority, opts.Logger, opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("http server metrics: %w", err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	if adm != nil {
		// First: a refusal costs no request id, span, access log line or
		// request metric, only its own counter.
		e.Use(adm.middleware())
	}
	e.Use(RequestID())
	if tracing.Enabled(opts.TracerProvider) {
		// Inside the request id, so the span can carry it; outside the rest,
		// so the access log line is written in the span and a panic the
		// recovery turns into a 500 marks the span as failed.
		e.Use(tracingMiddleware(opts.TracerProvider)...)
	}
	e.Use(AccessLog(opts.Logger), m.middleware(), Recovery(opts.Logger),
		Deadline(opts.Config.RequestTimeout), BodyLimit(opts.Config.BodyLimitBytes))
	e.NoRoute(func(c *gin.Context) { problem.Abort(c, http.StatusNotFound, "no such endpoint") })
	e.NoMethod(func(c *gin.Context) {
		problem.Abort(c, http.StatusMethodNotAllowed, "method not allowed on this endpoint")
	})

	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", readyz(opts.Checks))
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry})))

	retry := rangeOf(opts.Admission)
	base := withRetryAfter(context.Background(), retry)
	return &Server{
		engine: e,
		log:    opts.Logger,
		retry:  retry,
		srv: &http.Server{
			Addr:              opts.Addr,
			Handler:           e,
			BaseContext:       func(net.Listener) context.Context { return base },
			ReadHeaderTimeout: opts.Config.ReadHeaderTimeout,
			ReadTimeout:       opts.Config.ReadTimeout,
			WriteTimeout:      opts.Config.WriteTimeout,
			// Idle keep-alive connections are closed after a while, so a
			// client that went away does not hold a descriptor for ever.
			IdleTimeout: 2 * time.Minute,
		},
	}, nil
}

// Engine returns the gin engine to register routes on.
func (s *Server) Engine() *gin.Engine { return s.engine }

// Handler returns the server's handler, for httptest. It gives each
// request what Listen's connections give it, the Retry-After range of the
// server's 503 answers.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.engine.ServeHTTP(w, r.WithContext(withRetryAfter(r.Context(), s.retry)))
	})
}

// Listen binds the address now, so a port conflict is reported at start-up,
// and serves in the background. The returned channel yields the serve error
// (nil after a clean Shutdown).
func (s *Server) Listen() (<-chan error, error) {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", s.srv.Addr, err)
	}
	s.log.Info("http listening", "addr", ln.Addr().String())
	done := make(chan error, 1)
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	return done, nil
}

// Shutdown stops accepting connections and waits for in-flight requests to
// finish, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}

// readyz runs every check at once, so one slow dependency costs its own
// timeout and not the sum of all of them.
func readyz(checks map[string]Check) gin.HandlerFunc {
	return func(c *gin.Context) {
		var (
			mu     sync.Mutex
			wg     sync.WaitGroup
			failed = map[string]string{}
		)
		for name, check := range checks {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
				defer cancel()
				if err := check(ctx); err != nil {
					mu.Lock()
					failed[name] = err.Error()
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(failed) > 0 {
			names := make([]string, 0, len(failed))
			for n := range failed {
				names = append(names, n)
			}
			problem.Write(c, problem.New(http.StatusServiceUnavailable, fmt.Sprintf("not ready: %s unavailable", strings.Join(sortStrings(names), ", "))).With("failed", failed))
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready"})
	}
}
