package lab

// The order API rig of incidents 4 to 6 and of the order benchmarks: the
// order service as cmd/order runs it in the lab (StartService), with
// stand-ins for the coupon and payment services and a client for its API.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// NoGuard is OrderAPIConfig.Guard for none: POST /orders without the
// Idempotency-Key middleware (a benchmark's baseline).
const NoGuard variant.Mode = ""

// OrderAPIConfig is how one order API rig runs.
type OrderAPIConfig struct {
	// Guard is ORDER_IDEMPOTENCY_MODE (variant.Fixed or variant.Broken), or
	// NoGuard for none.
	Guard variant.Mode
	// Stock is ORDER_STOCK_MODE; empty is variant.Fixed.
	Stock variant.Mode
	// Clients is how many clients the rig's HTTP client keeps connections
	// for (default DoubleSubmitClients).
	Clients int
	// Close is ORDER_CLOSE_MODE; empty is variant.Fixed.
	Close variant.Mode
	// PaymentURL, when set, is the payment service the order service asks
	// to close a charge (incident 6); empty uses the Payments stand-in.
	PaymentURL string
	// CouponURL, when set, is the coupon service the order service locks
	// and releases coupons at (the benchmark's real one); empty uses the
	// Coupons stand-in.
	CouponURL string
	// Numbers is ORDER_NUMBERING_MODE (incident 7); empty is variant.Fixed.
	Numbers variant.Mode
	// Vars are more of the service's variables (TRACING_*, ...).
	Vars map[string]string
}

// OrderAPI is the order service (StartService) with stand-ins for the
// coupon and payment services, and a client for its HTTP API.
type OrderAPI struct {
	*Service
	URL    string
	Client *http.Client
	// Handler is the server's handler, every middleware included, for
	// callers that serve requests in process (the benchmarks).
	Handler http.Handler
	DB      *gorm.DB
	// Registry holds the service's metrics.
	Registry *prometheus.Registry
	// Coupons and Payments stand in for the coupon and payment services.
	Coupons  *stubs.CouponService
	Payments *stubs.PaymentService
	close    []func()
	// gate holds Race's requests at the server until all of them have
	// arrived (see arrivalGate).
	gate arrivalGate
}

// StartOrderAPI starts the order service as cmd/order runs it in the lab,
// with cfg's modes and peers. Close stops it and drops everything.
func StartOrderAPI(ctx context.Context, env lab.Env, suffix string, cfg OrderAPIConfig) (_ *OrderAPI, err error) {
	api := &OrderAPI{}
	defer func() {
		if err != nil {
			api.Close()
		}
	}()
	if cfg.Clients == 0 {
		cfg.Clients = DoubleSubmitClients
	}
	api.Coupons = stubs.NewCouponService(InternalToken)
	api.close = append(api.close, api.Coupons.Close)
	api.Payments = stubs.NewPaymentService(InternalToken)
	api.close = append(api.close, api.Payments.Close)
	vars := map[string]string{"COUPON_URL": api.Coupons.URL, "PAYMENT_URL": api.Payments.URL,
		"ORDER_IDEMPOTENCY_MODE": string(cfg.Guard), "ORDER_STOCK_MODE": string(cfg.Stock), "ORDER_CLOSE_MODE": string(cfg.Close),
		"ORDER_NUMBERING_MODE": string(cfg.Numbers)}
	if cfg.CouponURL != "" {
		vars["COUPON_URL"] = cfg.CouponURL
	}
	if cfg.PaymentURL != "" {
		vars["PAYMENT_URL"] = cfg.PaymentURL
	}
	for k, v := range vars {
		if v == "" {
			delete(vars, k)
		}
	}
	maps.Copy(vars, cfg.Vars)
	adjust := func(o *assembly.Options) {
		if cfg.Guard == NoGuard {
			o.Guard = func(*idempotency.Middleware, *slog.Logger) gin.HandlerFunc { return func(c *gin.Context) { c.Next() } }
		}
	}
	// The gate goes in front of every route of the service, so it is the
	// first thing a POST /orders meets after the platform's middleware.
	svc, err := StartService(ctx, env, suffix, vars, adjust, api.gate.hold)
	if err != nil {
		return nil, err
	}
	api.Service = svc
	api.close = append(api.close, svc.Close)
	api.URL, api.Handler, api.DB, api.Registry = svc.URL, svc.Wiring.Handler(), svc.Wiring.DB, svc.Wiring.Registry
	api.Client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients},
	}
	api.close = append(api.close, api.Client.CloseIdleConnections)
	return api, nil
}

// Close stops the service and the stand-ins and drops the database and
// Redis keys.
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

// CreateProduct creates a product priced price cents with stock units
// available, through the operator routes, and returns its id.
func (a *OrderAPI) CreateProduct(ctx context.Context, name string, price int64, stock int) (uint64, error) {
	var p struct {
		ID uint64 `json:"id"`
	}
	body := fmt.Sprintf(`{"brand":"lab","name":%q,"model":"M-%s","price":%d}`, name, name, price)
	if err := a.admin(ctx, http.MethodPost, "/admin/products", body, http.StatusCreated, &p); err != nil {
		return 0, err
	}
	return p.ID, a.SetStock(ctx, p.ID, stock)
}

// SetStock sets a product's available units through the operator route.
func (a *OrderAPI) SetStock(ctx context.Context, productID uint64, available int) error {
	return a.admin(ctx, http.MethodPut, fmt.Sprintf("/admin/products/%d/stock", productID), fmt.Sprintf(`{"available":%d}`, available), http.StatusOK, nil)
}

// admin sends an operator request and decodes its answer into out.
func (a *OrderAPI) admin(ctx context.Context, method, path, body string, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := a.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// OrderBody is the body of a POST /orders for quantity units of product.
func OrderBody(productID uint64, quantity int) string {
	return fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":%d}]}`, productID, quantity)
}

// Reply is one HTTP answer.
type Reply struct {
	Status   int
	Body     []byte
	Replayed bool
	// Start and End are when the request was sent and its answer read
	// (the lab report's timeline).
	Start, End time.Time
}

// RecordReplies puts replies on tl, the i-th as actor(i): a fresh 201 as
// the effect, a replayed 201 as absorbed, a 409 as refused, anything else
// as an error.
func RecordReplies(tl *lab.Timeline, replies []Reply, actor func(i int) string) {
	if tl == nil {
		return
	}
	for i, r := range replies {
		kind, label := lab.KindError, fmt.Sprintf("%d", r.Status)
		switch {
		case r.Status == http.StatusCreated && r.Replayed:
			kind, label = lab.KindAbsorbed, "201 replayed"
		case r.Status == http.StatusCreated:
			kind, label = lab.KindEffect, "201 order created"
		case r.Status == http.StatusConflict:
			kind, label = lab.KindRefused, "409 "+problemCode(r.Body)
		}
		tl.Add(lab.Event{Actor: actor(i), Kind: kind, Label: label, Start: r.Start, End: r.End})
	}
}

// PostOrder sends POST /orders as user (a user id in decimal) with key and
// body.
func (a *OrderAPI) PostOrder(ctx context.Context, user, key, body string) (Reply, error) {
	id, err := strconv.ParseUint(user, 10, 64)
	if err != nil {
		return Reply{}, fmt.Errorf("user %q: %w", user, err)
	}
	authz, err := a.Authorization(id)
	if err != nil {
		return Reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/orders", strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authz)
	req.Header.Set(idempotency.HeaderKey, key)
	start := time.Now()
	resp, err := a.Client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Status: resp.StatusCode, Body: b, Replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true",
		Start: start, End: time.Now()}, nil
}

// OrderRequest is one POST /orders of a race.
type OrderRequest struct {
	User, Key, Body string
}

// Race sends n POST /orders from n goroutines, the i-th being request(i),
// and lets the server handle them only once all n have arrived, so they
// meet together however long the client takes to dial its connections.
// The database pool is warmed first, as under load: on a cold pool the
// first request can finish its whole transaction while the others are
// still dialling MariaDB, and no race is left to see.
func (a *OrderAPI) Race(ctx context.Context, n int, request func(i int) OrderRequest) ([]Reply, error) {
	if err := a.warmPool(ctx, n); err != nil {
		return nil, err
	}
	out := make([]Reply, n)
	errs := make([]error, n)
	a.gate.arm(n)
	defer a.gate.disarm()
	var wg sync.WaitGroup
	for i := range n {
		r := request(i)
		wg.Go(func() {
			out[i], errs[i] = a.PostOrder(ctx, r.User, r.Key, r.Body)
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

// RaceOrders sends n copies of one POST /orders at once (see Race).
func (a *OrderAPI) RaceOrders(ctx context.Context, n int, user, key, body string) ([]Reply, error) {
	return a.Race(ctx, n, func(int) OrderRequest { return OrderRequest{User: user, Key: key, Body: body} })
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

// Counter returns the value of the counter name with labels in the rig's
// registry (zero when it has not counted yet).
func (a *OrderAPI) Counter(name string, labels map[string]string) (float64, error) {
	mfs, err := a.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// warmPool opens up to n of the database pool's connections by holding n
// at once for a moment; the pool keeps its idle share of them.
func (a *OrderAPI) warmPool(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = a.DB.WithContext(ctx).Exec("SELECT SLEEP(0.02)").Error })
	}
	wg.Wait()
	return errors.Join(errs...)
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

// AddCoupon makes a coupon known to the coupon stand-in, UNUSED: id for
// user, discount cents off an order of at least minOrder cents.
func (a *OrderAPI) AddCoupon(id, user uint64, discount, minOrder int64) {
	a.Coupons.Add(stubs.Coupon{ID: id, UserID: user, Discount: discount, MinOrderAmount: minOrder})
}

// CloseExpired runs one pass of the order-close job and returns how many
// orders it cancelled and how many it found paid.
func (a *OrderAPI) CloseExpired(ctx context.Context) (cancelled, paid int, err error) {
	rep, err := a.Parts.App.CloseExpired(ctx)
	return rep.Cancelled, rep.Paid, err
}

// HandPaymentSucceeded hands m, a payment.succeeded, to the service's
// consumer in a transaction of its own, as the inbox would; an error that
// inbox.IsPermanent reports is a refusal for good.
func (a *OrderAPI) HandPaymentSucceeded(ctx context.Context, m inbox.Message) error {
	consumer := platform.Bind(a.Parts.Orders.InboxTx, messaging.PaymentSucceeded(a.Parts.App))
	return a.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return consumer.Handle(ctx, tx, m) })
}
