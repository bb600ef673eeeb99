package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/config"
)

// Audience is the audience of the customers' tokens in the lab.
const Audience = "oncemall"

// Authorization is the Authorization header of a request by customer user:
// a bearer token of the issuer the service trusts, signed with the
// development key.
func (s *Service) Authorization(user uint64) (string, error) {
	tok, err := s.signer.Mint(s.Config.Auth.Issuer, s.Config.Auth.Audience, user, time.Hour, auth.RoleCustomer)
	return "Bearer " + tok, err
}

// The tokens of the lab's operator and internal routes.
const (
	AdminToken    = "lab-admin-token"
	InternalToken = "lab-internal-token"
)

// Service is the order service as a lab run starts it: built by the
// platform and assembled as cmd/order's wire() does (Plug, then
// assembly.Assemble), on a database, event prefix and Redis prefix of the
// run's own, served on a loopback port.
type Service struct {
	URL    string
	Config config.Config
	// Env is the environment Config was loaded from: a rig that runs the
	// service's own binary beside it, on its database and event prefix,
	// starts it with these and an address of its own.
	Env    map[string]string
	Parts  *assembly.Parts
	Wiring *platform.Wiring

	cancel context.CancelFunc
	done   chan error
	env    lab.Env
	name   string
	// signer mints the customers' tokens with the development key, for
	// the issuer the service trusts (AUTH_ISSUER); issuer is the run's own
	// when the caller named none.
	signer *auth.Signer
	issuer *auth.DevIssuer
}

// StartService starts the service named env.Name(suffix) with vars set on
// top of the lab's (peer URLs, modes, schedules). front, when set, runs in
// front of every route of the service (after the platform's middleware).
// adjust, when set, makes a benchmark's substitution on top of Plug's.
// Close stops it and drops what it created.
func StartService(ctx context.Context, env lab.Env, suffix string, vars map[string]string, adjust func(*assembly.Options), front ...gin.HandlerFunc) (_ *Service, err error) {
	name := env.Name(suffix)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	set := map[string]string{
		"ONCEMALL_ENV": "lab", "HTTP_ADDR": addr, "EVENT_SUBJECT_PREFIX": strings.ToLower(name) + ".",
		"MYSQL_ADDR": env.MySQL.Addr, "MYSQL_USER": env.MySQL.User, "MYSQL_PASSWORD": env.MySQL.Password, "MYSQL_DATABASE": name,
		"NATS_URL": env.NATS.URL, "REDIS_ADDR": env.Redis.Addr, "REDIS_PASSWORD": env.Redis.Password,
		"ADMIN_TOKEN": AdminToken, "INTERNAL_TOKEN": InternalToken, "IDEMPOTENCY_REDIS_PREFIX": name + ":idem:",
		"JOB_LOCK_TTL": "5s", "SHUTDOWN_TIMEOUT": "10s",
		// The scenarios run the order-close job's pass themselves, at the
		// moment their story says.
		"ORDER_CLOSE_SCHEDULE": "@every 24h",
		// A scenario's burst is the race it is about: every request is
		// admitted (no 503 for overload), and a batch copy may be large.
		"HTTP_MAX_IN_FLIGHT": "0", "HTTP_BODY_LIMIT_BYTES": "4194304",
	}
	if env.MySQL.MaxOpenConns > 0 {
		set["MYSQL_MAX_OPEN_CONNS"] = strconv.Itoa(env.MySQL.MaxOpenConns)
		set["MYSQL_MAX_IDLE_CONNS"] = strconv.Itoa(env.MySQL.MaxIdleConns)
	}
	for k, v := range vars {
		set[k] = v
	}
	// The customers are signed in with the development key, by an issuer
	// of the run's own unless vars name one (which must publish that key:
	// an identity service in dev or lab, another rig's DevIssuer).
	signer, err := auth.DevSigner()
	if err != nil {
		return nil, err
	}
	var issuer *auth.DevIssuer
	if _, ok := set["AUTH_ISSUER"]; !ok {
		if issuer, err = auth.StartDevIssuer(); err != nil {
			return nil, err
		}
		set["AUTH_ISSUER"], set["AUTH_AUDIENCE"] = issuer.URL, Audience
	}
	svc := assembly.Definition(nil)
	cfg, err := svc.Load(func(k string) (string, bool) { v, ok := set[k]; return v, ok })
	if err != nil {
		if issuer != nil {
			_ = issuer.Close()
		}
		return nil, fmt.Errorf("order service configuration: %w", err)
	}
	s := &Service{URL: "http://" + addr, Config: cfg, Env: set, env: env, name: name, done: make(chan error, 1),
		signer: signer, issuer: issuer}
	w, err := platform.Build(ctx, svc, cfg, env.Log)
	if err != nil {
		s.drop()
		return nil, err
	}
	s.Wiring = w
	if len(front) > 0 {
		w.Routes(func(r gin.IRouter) { r.Use(front...) })
	}
	var o assembly.Options
	Plug(&o, cfg)
	if adjust != nil {
		adjust(&o)
	}
	if s.Parts, err = assembly.Assemble(w, cfg, o); err != nil {
		// Serving on a cancelled context starts nothing new and shuts the
		// runtime down.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err = errors.Join(err, w.Serve(cctx))
		s.drop()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() { s.done <- w.Serve(sctx) }()
	if err := s.awaitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// awaitReady waits until GET /readyz answers 200.
func (s *Service) awaitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("order service stopped while starting: %v", err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("order service at %s not ready: %v", s.URL, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the service and drops its database, its streams and its
// Redis keys.
func (s *Service) Close() {
	if s.cancel != nil {
		s.cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
		}
		s.cancel = nil
	}
	s.drop()
}

func (s *Service) drop() {
	if s.issuer != nil {
		_ = s.issuer.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = database.DropDatabase(ctx, s.env.MySQL, s.name)
	ev := events.Config{SubjectPrefix: strings.ToLower(s.name) + "."}
	if conn, err := natsjs.Connect(ctx, s.env.NATS, s.name+"-cleanup", s.env.Log); err == nil {
		for _, root := range []string{"order", "product"} {
			_ = conn.JS.DeleteStream(ctx, ev.StreamName(root))
		}
		conn.NC.Close()
	}
	rdb := redisclient.New(s.env.Redis)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, s.name+":*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
