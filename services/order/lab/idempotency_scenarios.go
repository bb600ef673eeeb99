package lab

// Incident 4, client retries and double submits: a network timeout or a
// double click sends POST /orders again while the first request is still
// running. The order API is wired as cmd/order wires it (the platform's gin
// server, the Idempotency-Key guard chosen by its mode and the form-token
// check in front of POST /orders, the record completed inside the order's
// transaction by store.CompleteInTx) on a throwaway database and Redis
// prefix, served by an in-process HTTP server, and 50 clients send one
// request with one Idempotency-Key at once.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/formtoken"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/lab/dupproof"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

// Incident 4's extra variants: the seed-004 Redis guards, each raced on its
// own key (pkg/lab/dupproof).
const (
	VariantCheckThenSet  = "broken-check-then-set"
	VariantSetNX         = "fixed-set-nx"
	VariantSlidingWindow = "fixed-sliding-window"
)

// DoubleSubmitClients is how many copies of one POST /orders race.
const DoubleSubmitClients = 50

const incident4Title = "client retries / double submit"

// IdempotencyScenarios lists incident 4: the double submit against the
// broken check-then-act guard and the Idempotency-Key middleware, then the
// seed-004 table (check-then-set, SET NX, sliding window on Redis).
func IdempotencyScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 4, Variant: lab.Broken, WantHolds: false, Run: doubleSubmitScenario(lab.Broken, "i4b", variant.Broken)},
		{Incident: 4, Variant: lab.Fixed, WantHolds: true, Run: doubleSubmitScenario(lab.Fixed, "i4f", variant.Fixed)},
		{Incident: 4, Variant: VariantCheckThenSet, WantHolds: false, Run: redisGuardScenario(VariantCheckThenSet, dupproof.CheckThenSet, 100, 1)},
		{Incident: 4, Variant: VariantSetNX, WantHolds: true, Run: redisGuardScenario(VariantSetNX, dupproof.SetNX, 100, 1)},
		{Incident: 4, Variant: VariantSlidingWindow, WantHolds: true, Run: redisGuardScenario(VariantSlidingWindow, dupproof.SlidingWindow, 200, 5)},
	}
}

// OrderAPI is the order service's HTTP API on a throwaway database, with the
// entry guard of the mode StartOrderAPI was given.
type OrderAPI struct {
	URL    string
	Client *http.Client
	// Handler is the server's handler, every middleware included, for
	// callers that serve requests in process (the benchmark).
	Handler http.Handler
	DB      *gorm.DB
	close   []func()
	// gate holds RaceOrders' requests at the server until all of them
	// have arrived (see arrivalGate).
	gate arrivalGate
}

// StartOrderAPI wires the order API as cmd/order does, with the service's
// defaults and guard as ORDER_IDEMPOTENCY_MODE (variant.Fixed or
// variant.Broken; NoGuard, the benchmark's baseline, for none), and serves
// it on an in-process HTTP server. The outbox relay is not run: its
// order.created rows would be published to the shared ORDER subjects, which
// a running order service consumes; they stay in the throwaway database,
// where the scenario counts them. Close drops everything.
func StartOrderAPI(ctx context.Context, env lab.Env, suffix string, guard variant.Mode) (_ *OrderAPI, err error) {
	api := &OrderAPI{}
	defer func() {
		if err != nil {
			api.Close()
		}
	}()
	cfg, err := serviceConfig(config.Modes{OrderIdempotency: guard, ProductCopy: variant.Fixed})
	if err != nil {
		return nil, err
	}
	db, drop, err := env.OpenDB(ctx, suffix, migrations.Source, outbox.Migrations, inbox.Migrations, idempotency.Migrations)
	if err != nil {
		return nil, err
	}
	api.close = append(api.close, drop)
	api.DB = db

	rdb := redisclient.New(env.Redis)
	api.close = append(api.close, func() { _ = rdb.Close() })
	redisPrefix := env.Name(suffix) + ":"
	api.close = append(api.close, func() { deleteKeys(rdb, redisPrefix) })

	reg := prometheus.NewRegistry()
	orders := store.New(db, noRelay)
	a, err := app.New(orders, store.NewProducts(db, noRelay), cfg.App(), env.Log, reg)
	if err != nil {
		return nil, err
	}
	tokensCfg := cfg.FormTokens()
	tokensCfg.Prefix = redisPrefix + "formtoken:"
	tokens, err := formtoken.New(rdb, tokensCfg)
	if err != nil {
		return nil, err
	}
	opts := httpapi.Options{Log: env.Log, Tokens: tokens, CompleteInTx: store.CompleteInTx}
	if guard != NoGuard {
		idemCfg := cfg.Idempotency
		idemCfg.EntryPrefix = redisPrefix + "idem:"
		idem, err := idempotency.New(db, rdb, idemCfg, env.Log, reg)
		if err != nil {
			return nil, err
		}
		opts.Guard = idem.HandlerInTxFor(string(guard))
	}
	srv := httpserver.New(httpserver.Options{Addr: "127.0.0.1:0", Config: httpserver.Config{BodyLimitBytes: 1 << 20}, Logger: env.Log, Registry: reg})
	// The gate goes in front of every route registered after it, so it is
	// the first thing a POST /orders meets.
	srv.Engine().Use(api.gate.hold)
	httpapi.New(a, opts).Register(srv.Engine())
	api.Handler = srv.Handler()
	ts := httptest.NewServer(api.Handler)
	api.close = append(api.close, ts.Close)
	api.URL = ts.URL
	api.Client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: DoubleSubmitClients},
	}
	api.close = append(api.close, api.Client.CloseIdleConnections)
	return api, nil
}

// NoGuard is StartOrderAPI's guard for none: POST /orders without the
// Idempotency-Key middleware.
const NoGuard variant.Mode = ""

// Close stops the server and drops the database and Redis keys.
func (a *OrderAPI) Close() {
	for i := len(a.close) - 1; i >= 0; i-- {
		a.close[i]()
	}
	a.close = nil
}

// Count returns the rows of table in the API's database.
func (a *OrderAPI) Count(ctx context.Context, table string) (int64, error) {
	var n int64
	err := a.DB.WithContext(ctx).Table(table).Count(&n).Error
	return n, err
}

// Reply is one HTTP answer.
type Reply struct {
	Status   int
	Body     []byte
	Replayed bool
}

// PostOrder sends POST /orders as user with key and body.
func (a *OrderAPI) PostOrder(ctx context.Context, user, key, body string) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/orders", strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(httpapi.UserIDHeader, user)
	req.Header.Set(idempotency.HeaderKey, key)
	resp, err := a.Client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Status: resp.StatusCode, Body: b, Replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true"}, nil
}

// RaceOrders sends n copies of one POST /orders from n goroutines and lets
// the server handle them only once all n have arrived, so they meet the
// guard together however long the client takes to dial its connections.
func (a *OrderAPI) RaceOrders(ctx context.Context, n int, user, key, body string) ([]Reply, error) {
	out := make([]Reply, n)
	errs := make([]error, n)
	a.gate.arm(n)
	defer a.gate.disarm()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out[i], errs[i] = a.PostOrder(ctx, user, key, body)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Answers summarises the replies to copies of one request.
type Answers struct {
	Fresh, Replayed, Conflict, Other int
	// Identical: every 201 carried the same body.
	Identical bool
	Body      []byte // the first 201's body
}

// Summarise sorts replies into fresh 201s, replayed 201s, 409s and the rest.
func Summarise(rs []Reply) Answers {
	a := Answers{Identical: true}
	for _, r := range rs {
		switch {
		case r.Status == http.StatusCreated:
			if r.Replayed {
				a.Replayed++
			} else {
				a.Fresh++
			}
			if a.Body == nil {
				a.Body = r.Body
			} else if !bytes.Equal(a.Body, r.Body) {
				a.Identical = false
			}
		case r.Status == http.StatusConflict:
			a.Conflict++
		default:
			a.Other++
		}
	}
	return a
}

// doubleSubmitScenario races DoubleSubmitClients copies of one POST /orders
// (one user, one Idempotency-Key, one body), then retries once more after
// they all answered, and counts the orders and order.created events in the
// database. The invariant: one order and one event for the key, every 201
// the same body, and the late retry replayed with that body.
func doubleSubmitScenario(variant, suffix string, guard variant.Mode) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 4,
			Title:    incident4Title,
			Variant:  variant,
			Injected: fmt.Sprintf("%d concurrent POST /orders, one Idempotency-Key (guard %s), then 1 late retry", DoubleSubmitClients, guard),
			Effect:   "orders for the key",
			Expected: "= 1, identical 201 bodies",
		}
		api, err := StartOrderAPI(ctx, env, suffix, guard)
		if err != nil {
			return res, err
		}
		defer api.Close()

		const user, body = "4004", `{"amount":1999}`
		key := "lab-" + env.Prefix + "-" + suffix
		env.Note("incident 4 %s: %d clients send one POST /orders with one key", variant, DoubleSubmitClients)
		replies, err := api.RaceOrders(ctx, DoubleSubmitClients, user, key, body)
		if err != nil {
			return res, err
		}
		late, err := api.PostOrder(ctx, user, key, body)
		if err != nil {
			return res, err
		}
		ans := Summarise(append(replies, late))
		orders, err := api.Count(ctx, "orders")
		if err != nil {
			return res, err
		}
		events, err := api.Count(ctx, "local_message")
		if err != nil {
			return res, err
		}
		res.Count = int(orders)
		res.Effect = fmt.Sprintf("orders for the key (outbox rows %d; answers: %d new 201, %d replayed, %d×409, %d other)",
			events, ans.Fresh, ans.Replayed, ans.Conflict, ans.Other)
		lateOK := late.Status == http.StatusCreated && late.Replayed && bytes.Equal(late.Body, ans.Body)
		res.Holds = orders == 1 && events == 1 && ans.Fresh == 1 && ans.Other == 0 && ans.Identical && lateOK
		return res, nil
	}
}

// redisGuardScenario races n goroutines for one Redis key through one of
// the seed-004 guards, wanting allow of them through.
func redisGuardScenario(variant, guard string, n, allow int) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 4,
			Title:    incident4Title,
			Variant:  variant,
			Injected: fmt.Sprintf("%d goroutines race for one Redis key, allow %d", n, allow),
			Effect:   "passed the guard: " + guard,
		}
		rdb := redisclient.New(env.Redis)
		defer rdb.Close()
		row, err := dupproof.RunGuard(ctx, rdb, env.Name(variant)+":", guard, n, allow)
		if err != nil {
			return res, err
		}
		res.Count, res.Holds = row.Passed, row.Holds
		res.Expected = fmt.Sprintf("= %d", row.Want)
		return res, nil
	}
}

// arrivalGate, while armed for n requests, holds each request that reaches
// it until n have, then releases them together (or lets each go after
// gateTimeout, so a lost client cannot hang the scenario). Disarmed, it
// lets every request straight through.
type arrivalGate struct {
	mu      sync.Mutex
	waiting int
	want    int
	open    chan struct{}
}

const gateTimeout = 10 * time.Second

func (g *arrivalGate) arm(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.want, g.waiting, g.open = n, 0, make(chan struct{})
}

func (g *arrivalGate) disarm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.want, g.open = 0, nil
}

func (g *arrivalGate) hold(c *gin.Context) {
	g.mu.Lock()
	open := g.open
	if open != nil {
		g.waiting++
		if g.waiting == g.want {
			close(open)
		}
	}
	g.mu.Unlock()
	if open != nil {
		select {
		case <-open:
		case <-time.After(gateTimeout):
		}
	}
	c.Next()
}

// noRelay stands in for the outbox relay's Wake, which the lab does not run
// (see StartOrderAPI).
func noRelay() {}

// serviceConfig is the order service's configuration when nothing is set,
// with modes: what cmd/order runs with in the lab.
func serviceConfig(modes config.Modes) (config.Config, error) {
	var cfg config.Config
	if err := pkgconfig.LoadFrom(&cfg, func(string) (string, bool) { return "", false }); err != nil {
		return config.Config{}, err
	}
	cfg.Modes = modes
	return cfg, nil
}

// deleteKeys removes the run's Redis keys (idempotency entries, form tokens).
func deleteKeys(rdb *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
