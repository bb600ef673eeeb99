package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/apitest"
	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/ordertest"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// The tokens of the operator and internal routes in these tests.
const (
	adminToken    = ordertest.AdminToken
	internalToken = ordertest.InternalToken
)

// spec is the routes' contract, docs/api/order.yaml: every request these
// tests send and every answer they get is checked against it.
var spec = apitest.MustLoad("order.yaml")

// TestMain fails the package when an operation of order.yaml is never
// exercised here, but for the routes pkg/platform serves and tests.
func TestMain(m *testing.M) {
	const platform = "served and tested by pkg/platform and pkg/httpserver, not by these handlers"
	apitest.Main(m, spec, map[string]string{
		"POST /admin/outbox/redrive": platform,
		"GET /healthz":               platform,
		"GET /readyz":                platform,
		"GET /metrics":               platform,
	})
}

type server struct {
	*ordertest.Service
	t  *testing.T
	db *gorm.DB
	// e serves the routes, checked against spec.
	e      http.Handler
	app    *app.App
	orders *store.Store
}

// newServer is the service in its default configuration, assembled as
// cmd/order assembles it (ordertest); its routes are served in process.
func newServer(t *testing.T) *server {
	return newServerWith(t, nil, assembly.Options{})
}

// newServerWith is newServer with the service's variables vars set and o's
// substitutions.
func newServerWith(t *testing.T, vars map[string]string, o assembly.Options) *server {
	env := ordertest.Start(t, vars, o)
	return &server{Service: env, t: t, db: env.DB, e: spec.Handler(t, env.Handler), app: env.App, orders: env.Orders}
}

// newServerRedisDown is newServerWith on a Redis the service loses once it
// has started: the Idempotency-Key layer's entry lookups fail, and the
// database decides alone.
func newServerRedisDown(t *testing.T, vars map[string]string, o assembly.Options) *server {
	redis := testenv.NewForwarder(t, testenv.Config(t).Redis.Addr)
	vars = maps.Clone(vars)
	if vars == nil {
		vars = map[string]string{}
	}
	vars["REDIS_ADDR"] = redis.Addr()
	s := newServerWith(t, vars, o)
	redis.Close()
	return s
}

// unguarded is s served by handlers built with no Options: httpapi.New's
// own defaults, which the assembly never leaves in place, refuse every
// caller of a guarded route.
func (s *server) unguarded(t *testing.T) *server {
	e := gin.New()
	api, err := httpapi.New(s.app, httpapi.Options{Log: testenv.Logger(t)})
	testenv.Must(t, err)
	api.Register(e)
	return &server{Service: s.Service, t: t, db: s.db, e: spec.Handler(t, e), app: s.app, orders: s.orders}
}

// request is one HTTP request to the server.
type request struct {
	method, path string
	// user is the customer: a positive id sends their access token, any
	// other text only an X-User-ID header with it (refused), empty neither.
	user string
	auth string // Authorization; none when empty
	body string
	typ  string // Content-Type: application/json when empty, none when "none"
}

func (s *server) send(r request) *httptest.ResponseRecorder {
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	if id, err := strconv.ParseUint(r.user, 10, 64); err == nil && id > 0 {
		req.Header.Set("Authorization", "Bearer "+s.Token(s.t, id))
	} else if r.user != "" {
		req.Header.Set(auth.UserIDHeader, r.user)
	}
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	// POST /orders runs behind the Idempotency-Key guard, as in
	// production: each request is a new one.
	if r.method == http.MethodPost && r.path == "/orders" {
		req.Header.Set(idempotency.HeaderKey, idempotencytest.NewKey())
	}
	switch r.typ {
	case "":
		req.Header.Set("Content-Type", "application/json")
	case "none":
	default:
		req.Header.Set("Content-Type", r.typ)
	}
	if r.method == http.MethodPost && r.path == "/orders" {
		// The deployed route requires a key (order.yaml); these handlers,
		// built without the Guard, ignore it.
		req.Header.Set(idempotency.HeaderKey, idempotencytest.NewKey())
	}
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	return rec
}

func (s *server) do(method, path, userID, body string) *httptest.ResponseRecorder {
	return s.send(request{method: method, path: path, user: userID, body: body})
}

// admin sends an operator request with the admin token.
func (s *server) admin(method, path, body string) *httptest.ResponseRecorder {
	return s.send(request{method: method, path: path, auth: "Bearer " + adminToken, body: body})
}

func (s *server) count(t *testing.T, table string) int64 {
	return int64(s.Count(t, "SELECT COUNT(*) FROM "+table))
}

// decode reads an answer into an order.
func decode(t *testing.T, rec *httptest.ResponseRecorder) httpapi.OrderResponse {
	t.Helper()
	var o httpapi.OrderResponse
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &o))
	return o
}

// problemDoc reads a problem+json answer, failing the test when it is not
// one.
func problemDoc(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("answer %d with Content-Type %q, want %s: %s", rec.Code, ct, problem.ContentType, rec.Body)
	}
	doc := map[string]any{}
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	return doc
}

// TestCreateOrderPricesFromTheCatalog: an order names products and
// quantities; the prices and names come from the catalog and are
// snapshotted on the items; the coupon is locked for the order and its
// discount applied; the stock is taken and reserved, and no event is
// queued (nothing needs one before the order is paid or cancelled). A
// later price change does not change the order. Only the owner reads it.
func TestCreateOrderPricesFromTheCatalog(t *testing.T) {
	s := newServer(t)
	kettle := s.Product(t, "Kettle", 1500, 10)
	lamp := s.Product(t, "Lamp", 99, 5)
	s.Coupons.Add(stubs.Coupon{ID: 7, UserID: 42, Discount: 500, MinOrderAmount: 1000})

	rec := s.do(http.MethodPost, "/orders", "42", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2},{"product_id":%d,"quantity":1}],"coupon_id":7}`, kettle, lamp))
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	o := decode(t, rec)
	wantItems := []httpapi.ItemJSON{{ProductID: kettle, Name: "Kettle", UnitPrice: 1500, Quantity: 2}, {ProductID: lamp, Name: "Lamp", UnitPrice: 99, Quantity: 1}}
	if o.Status != "WAIT_PAY" || o.UserID != 42 || o.TotalAmount != 3099 || o.DiscountAmount != 500 || o.PayAmount != 2599 ||
		o.CouponID == nil || *o.CouponID != 7 || len(o.Items) != 2 || o.Items[0] != wantItems[0] || o.Items[1] != wantItems[1] {
		t.Fatalf("created order: %+v", o)
	}
	if loc := rec.Header().Get("Location"); loc != "/orders/"+o.OrderNo {
		t.Fatalf("Location %q", loc)
	}
	// Placing an order publishes nothing: the outbox is left alone.
	var queued int64
	testenv.Must(t, s.db.Raw("SELECT COUNT(*) FROM local_message").Row().Scan(&queued))
	if queued != 0 {
		t.Fatalf("%d outbox rows; want none", queued)
	}
	if s.Stock(t, kettle) != 8 || s.Stock(t, lamp) != 4 || s.Reservations(t, o.OrderNo, order.Reserved) != 2 {
		t.Fatalf("stock %d and %d, %d reservations; want 8, 4 and 2", s.Stock(t, kettle), s.Stock(t, lamp), s.Reservations(t, o.OrderNo, order.Reserved))
	}
	if st, holder := s.Coupons.State(7); st != stubs.CouponLocked || holder != o.OrderNo {
		t.Fatalf("coupon 7 is %s by %q, want LOCKED by %s", st, holder, o.OrderNo)
	}

	// The catalog's price moves; the order keeps its snapshot.
	testenv.Must(t, s.db.Exec("UPDATE products SET price = 9999, name = 'Steel kettle' WHERE id = ?", kettle).Error)
	rec = s.do(http.MethodGet, "/orders/"+o.OrderNo, "42", "")
	if got := decode(t, rec); rec.Code != http.StatusOK || got.Items[0] != wantItems[0] || got.PayAmount != 2599 {
		t.Fatalf("get after a price change: %d %s", rec.Code, rec.Body)
	}
	for _, user := range []string{"43", "1"} {
		if rec := s.do(http.MethodGet, "/orders/"+o.OrderNo, user, ""); rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "Kettle") {
			t.Errorf("GET another user's order as %s: %d %s, want 404", user, rec.Code, rec.Body)
		} else {
			problemDoc(t, rec)
		}
	}
	for _, user := range []string{"", "abc", "0", "42"} {
		rec := s.send(request{method: http.MethodGet, path: "/orders/" + o.OrderNo, user: user, auth: func() string {
			if user == "42" {
				return "Bearer " + s.Issuer.Expired(t, 42, auth.RoleCustomer)
			}
			return ""
		}()})
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("GET with X-User-ID %q and no valid token: %d, want 401", user, rec.Code)
		}
	}
}

// TestCreateOrderBadInputWritesNothing: every refusal the contract lists
// gets its status as problem+json and writes nothing: no order, item,
// reservation or event, the stock as it was, no coupon left locked, the
// relay never woken.
func TestCreateOrderBadInputWritesNothing(t *testing.T) {
	s := newServer(t)
	kettle := s.Product(t, "Kettle", 1500, 3)
	gone := s.Product(t, "Gone", 100, 10)
	testenv.Must(t, s.app.DeleteProduct(context.Background(), gone))
	s.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100, MinOrderAmount: 0})
	s.Coupons.Add(stubs.Coupon{ID: 2, UserID: 2, Discount: 100})
	s.Coupons.Add(stubs.Coupon{ID: 3, UserID: 1, Discount: 100, Expired: true})
	s.Coupons.Add(stubs.Coupon{ID: 4, UserID: 1, Discount: 100, MinOrderAmount: 100_000})
	s.Coupons.Add(stubs.Coupon{ID: 5, UserID: 1, Discount: 1500}) // not below the order: it would be free
	s.Coupons.Add(stubs.Coupon{ID: 6, UserID: 1, Discount: 100})
	s.Coupons.Use(6)
	item := func(q int) string { return fmt.Sprintf(`{"product_id":%d,"quantity":%d}`, kettle, q) }

	cases := []struct {
		name, user, body string
		status           int
		says             string // in the detail, or the reason/code member
	}{
		{"no token", "", `{"items":[` + item(1) + `]}`, 401, "bearer token"},
		{"X-User-ID not a number", "abc", `{"items":[` + item(1) + `]}`, 401, "bearer token"},
		{"X-User-ID zero", "0", `{"items":[` + item(1) + `]}`, 401, "bearer token"},
		{"malformed json", "1", `{"items":`, 400, "malformed"},
		{"trailing data", "1", `{"items":[` + item(1) + `]} {}`, 400, "trailing"},
		{"a client price", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1,"unit_price":1}]}`, kettle), 400, `"unit_price"`},
		{"a client name", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1,"name":"x"}]}`, kettle), 400, `"name"`},
		{"an amount-only order", "1", `{"amount":1}`, 400, `"amount"`},
		{"an amount beside items", "1", `{"items":[` + item(1) + `],"amount":1}`, 400, `"amount"`},
		{"unknown field", "1", `{"items":[` + item(1) + `],"coupon":3}`, 400, `"coupon"`},
		{"no items", "1", `{}`, 400, "at least one item"},
		{"empty items", "1", `{"items":[]}`, 400, "at least one item"},
		{"zero quantity", "1", `{"items":[` + item(0) + `]}`, 400, "quantity"},
		{"negative quantity", "1", `{"items":[` + item(-1) + `]}`, 400, "quantity"},
		{"1000 units", "1", `{"items":[` + item(1000) + `]}`, 400, "quantity"},
		{"fractional quantity", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1.5}]}`, kettle), 400, "quantity"},
		{"no product id", "1", `{"items":[{"quantity":1}]}`, 400, "product_id"},
		{"duplicate product", "1", `{"items":[` + item(1) + `,` + item(2) + `]}`, 400, "twice"},
		{"coupon zero", "1", `{"items":[` + item(1) + `],"coupon_id":0}`, 400, "coupon_id"},
		{"unknown product", "1", `{"items":[{"product_id":999999,"quantity":1}]}`, 422, "999999"},
		{"deleted product", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, gone), 422, "deleted"},
		{"too little stock", "1", `{"items":[` + item(4) + `]}`, 409, httpapi.CodeOutOfStock},
		{"too little stock, with a coupon", "1", `{"items":[` + item(4) + `],"coupon_id":1}`, 409, httpapi.CodeOutOfStock},
		{"coupon not found", "1", `{"items":[` + item(1) + `],"coupon_id":99}`, 422, "not_found"},
		{"another user's coupon", "1", `{"items":[` + item(1) + `],"coupon_id":2}`, 422, "not_owner"},
		{"expired coupon", "1", `{"items":[` + item(1) + `],"coupon_id":3}`, 422, "expired"},
		{"below the coupon's minimum", "1", `{"items":[` + item(1) + `],"coupon_id":4}`, 422, "below_minimum"},
		{"a coupon that would make it free", "1", `{"items":[` + item(1) + `],"coupon_id":5}`, 422, "below_minimum"},
		{"a used coupon", "1", `{"items":[` + item(1) + `],"coupon_id":6}`, 422, "not_available"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := s.do(http.MethodPost, "/orders", c.user, c.body)
			if rec.Code != c.status {
				t.Fatalf("%d %s, want %d", rec.Code, rec.Body, c.status)
			}
			doc := problemDoc(t, rec)
			said := fmt.Sprint(doc["detail"], " ", doc["reason"], " ", doc["code"])
			if !strings.Contains(said, c.says) {
				t.Fatalf("answer %s does not say %q", rec.Body, c.says)
			}
			if c.status == 422 && doc["reason"] != nil && doc["coupon_id"] == nil {
				t.Fatalf("coupon refusal %s does not name the coupon", rec.Body)
			}
		})
	}
	for _, table := range []string{"orders", "order_items", "stock_reservation", "local_message"} {
		if n := s.count(t, table); n != 0 {
			t.Fatalf("bad input wrote %d rows into %s", n, table)
		}
	}
	if got := s.Stock(t, kettle); got != 3 {
		t.Fatalf("stock %d after refusals, want 3", got)
	}
	if st, _ := s.Coupons.State(1); st != stubs.CouponUnused {
		t.Fatalf("coupon 1 is %s after the out-of-stock order that locked it, want UNUSED (released)", st)
	}
	if _, releases := s.Coupons.Calls(); len(releases) != 1 {
		t.Fatalf("%d release calls, want 1 (the out-of-stock order with a coupon)", len(releases))
	}
	if rec := s.do(http.MethodGet, "/orders/nope", "1", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("unknown order: %d %s", rec.Code, rec.Body)
	}
}

// TestCreateOrderWithTheCouponServiceDown: a coupon service that answers
// 503 is a 503 with Retry-After; nothing is written, and the lock that may
// have been taken is released (here it was not: the release finds none).
func TestCreateOrderWithTheCouponServiceDown(t *testing.T) {
	s := newServer(t)
	kettle := s.Product(t, "Kettle", 1500, 3)
	s.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100})
	s.Coupons.SetDown(true)
	rec := s.do(http.MethodPost, "/orders", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}],"coupon_id":1}`, kettle))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("coupon service down: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	problemDoc(t, rec)
	if n := s.count(t, "orders") + s.count(t, "stock_reservation") + s.count(t, "local_message"); n != 0 || s.Stock(t, kettle) != 3 {
		t.Fatalf("%d rows written, stock %d", n, s.Stock(t, kettle))
	}
	if _, releases := s.Coupons.Calls(); len(releases) != 1 {
		t.Fatalf("%d release calls after a lock without an answer, want 1", len(releases))
	}

	// A lock that took effect but whose answer was lost on the way back:
	// released all the same, so the coupon is free again.
	s.Coupons.SetDown(false)
	s.Coupons.LoseLockAnswers(true)
	rec = s.do(http.MethodPost, "/orders", "1", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}],"coupon_id":1}`, kettle))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("lock answer lost: %d %s, want 503", rec.Code, rec.Body)
	}
	if st, _ := s.Coupons.State(1); st != stubs.CouponUnused || s.count(t, "orders") != 0 {
		t.Fatalf("coupon %s and %d orders after a lost lock answer, want UNUSED and none", st, s.count(t, "orders"))
	}
}

// TestOrderFailingAfterTheLockReleasesTheCoupon: when the order's
// transaction fails after the coupon was locked (here the Idempotency-Key
// completion in it fails), the order rolls back and the lock is released;
// a retry can use the coupon.
func TestOrderFailingAfterTheLockReleasesTheCoupon(t *testing.T) {
	fail := true
	s := newServerWith(t, nil, assembly.Options{CompleteInTx: func(next assembly.Complete) assembly.Complete {
		return func(ctx context.Context, tx order.Tx, status int, body []byte) error {
			if fail {
				return errors.New("the idempotency record could not be written")
			}
			return next(ctx, tx, status, body)
		}
	}})
	kettle := s.Product(t, "Kettle", 1500, 3)
	s.Coupons.Add(stubs.Coupon{ID: 1, UserID: 1, Discount: 100})
	body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}],"coupon_id":1}`, kettle)
	if rec := s.do(http.MethodPost, "/orders", "1", body); rec.Code != http.StatusInternalServerError {
		t.Fatalf("failing transaction: %d %s", rec.Code, rec.Body)
	}
	if st, _ := s.Coupons.State(1); st != stubs.CouponUnused {
		t.Fatalf("coupon %s after the order rolled back, want UNUSED", st)
	}
	if n := s.count(t, "orders") + s.count(t, "stock_reservation"); n != 0 || s.Stock(t, kettle) != 3 {
		t.Fatalf("%d rows, stock %d after the rollback", n, s.Stock(t, kettle))
	}
	fail = false
	rec := s.do(http.MethodPost, "/orders", "1", body)
	if rec.Code != http.StatusCreated {
		t.Fatalf("retry: %d %s", rec.Code, rec.Body)
	}
	if st, holder := s.Coupons.State(1); st != stubs.CouponLocked || holder != decode(t, rec).OrderNo {
		t.Fatalf("coupon %s by %s after the retry", st, holder)
	}
}

// The CompleteInTx seam (store.CompleteInTx plugs the Idempotency-Key
// record in there) runs inside the create transaction with the exact
// response: its write commits with the order, its failure rolls back the
// order, and the client gets byte for byte the body it was given.
func TestCreateOrderCompleteInTxSharesTheTransaction(t *testing.T) {
	fail := false
	var stored []byte
	s := newServerWith(t, nil, assembly.Options{CompleteInTx: func(next assembly.Complete) assembly.Complete {
		return func(ctx context.Context, tx order.Tx, status int, body []byte) error {
			if fail {
				return errors.New("idempotency claim lost")
			}
			stored = body
			if err := tx.AddEvent(ctx, events.Event{ID: fmt.Sprintf("hook-%d", status), Subject: "hook.record", Payload: json.RawMessage(body)}); err != nil {
				return err
			}
			return next(ctx, tx, status, body)
		}
	}})
	body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, s.Product(t, "Kettle", 100, 10))
	rec := s.do(http.MethodPost, "/orders", "1", body)
	if rec.Code != http.StatusCreated || s.count(t, "local_message") != 1 {
		t.Fatalf("hook write not committed with the order: %d, %d outbox rows", rec.Code, s.count(t, "local_message"))
	}
	if !bytes.Equal(rec.Body.Bytes(), stored) || rec.Header().Get("Content-Type") != httpapi.JSONContentType {
		t.Fatalf("response %q (%s) differs from the stored body %q", rec.Body, rec.Header().Get("Content-Type"), stored)
	}
	fail = true
	if rec := s.do(http.MethodPost, "/orders", "1", body); rec.Code != http.StatusInternalServerError {
		t.Fatalf("failing hook: %d", rec.Code)
	}
	if o, m, r := s.count(t, "orders"), s.count(t, "local_message"), s.count(t, "stock_reservation"); o != 1 || m != 1 || r != 1 {
		t.Fatalf("a failing hook left %d orders, %d outbox rows and %d reservations, want 1, 1 and 1", o, m, r)
	}
}

// TestInternalOrderRoute: GET /internal/orders/{no} answers another
// service, with the internal token only, the order's number, owner, status
// and pay amount; 404 for none.
func TestInternalOrderRoute(t *testing.T) {
	s := newServer(t)
	o := s.PlaceOrder(t, 7, order.Line{ProductID: s.Product(t, "Kettle", 1500, 3), Quantity: 2})
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + adminToken} {
		if rec := s.send(request{method: http.MethodGet, path: "/internal/orders/" + o.No, auth: auth}); rec.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, rec.Code)
		}
	}
	rec := s.send(request{method: http.MethodGet, path: "/internal/orders/" + o.No, auth: "Bearer " + internalToken})
	if rec.Code != http.StatusOK || rec.Body.String() != fmt.Sprintf(`{"order_no":%q,"user_id":7,"status":"WAIT_PAY","pay_amount":3000}`, o.No) {
		t.Fatalf("internal order: %d %s", rec.Code, rec.Body)
	}
	if rec := s.send(request{method: http.MethodGet, path: "/internal/orders/O-none", auth: "Bearer " + internalToken}); rec.Code != http.StatusNotFound {
		t.Fatalf("unknown order: %d", rec.Code)
	}
	// Handlers built without an internal guard refuse every caller.
	open := s.unguarded(t)
	if rec := open.send(request{method: http.MethodGet, path: "/internal/orders/" + o.No, auth: "Bearer "}); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no internal token configured: %d, want 401", rec.Code)
	}
}

// TestProductWritesAreOperatorRoutes: creating, deleting, stocking and
// batch-copying products need the admin token (401 otherwise, nothing
// written); reads are public and show the stock; the stock route refuses
// bad input with 400 and an unknown product with 404.
func TestProductWritesAreOperatorRoutes(t *testing.T) {
	s := newServer(t)
	writes := []request{
		{method: http.MethodPost, path: "/admin/products", body: `{"brand":"b","name":"n","model":"m","price":1}`},
		{method: http.MethodPut, path: "/admin/products/1/stock", body: `{"available":5}`},
		{method: http.MethodDelete, path: "/admin/products/1"},
		{method: http.MethodPost, path: "/admin/products/templates", body: `{"templates":[{"brand":"b","name":"n","model":"m","price":1}]}`},
		{method: http.MethodPost, path: "/admin/products/batch-copy", body: `{"request_id":"r","source_brand":"b","target_brand":"c"}`},
		{method: http.MethodGet, path: "/admin/products/batch-copy/x"},
	}
	for _, w := range writes {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + internalToken} {
			w.auth = auth
			if rec := s.send(w); rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", w.method, w.path, auth, rec.Code)
			}
		}
	}
	for _, old := range []request{
		{method: http.MethodPost, path: "/products", body: `{"brand":"b","name":"n","model":"m","price":1}`},
		{method: http.MethodPost, path: "/products/batch-copy", body: `{}`},
	} {
		if rec := s.send(old); rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s is still served: %d", old.method, old.path, rec.Code)
		}
	}
	if n := s.count(t, "products") + s.count(t, "product_stock") + s.count(t, "product_templates") + s.count(t, "product_copy_jobs"); n != 0 {
		t.Fatalf("unauthorized writes wrote %d rows", n)
	}

	rec := s.admin(http.MethodPost, "/admin/products", `{"brand":"b","name":"Kettle","model":"K1","price":1500}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var p struct {
		ID        uint64 `json:"id"`
		Available int    `json:"available"`
	}
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &p))
	stockPath := fmt.Sprintf("/admin/products/%d/stock", p.ID)
	for _, bad := range []string{`{}`, `{"available":-1}`, `{"available":1000000001}`, `{"available":"5"}`, `{"available":5,"version":1}`, ``} {
		if rec := s.admin(http.MethodPut, stockPath, bad); rec.Code != http.StatusBadRequest {
			t.Errorf("PUT stock %s: %d %s, want 400", bad, rec.Code, rec.Body)
		}
	}
	if rec := s.admin(http.MethodPut, "/admin/products/999999/stock", `{"available":5}`); rec.Code != http.StatusNotFound {
		t.Errorf("stock of an unknown product: %d, want 404", rec.Code)
	}
	if n := s.count(t, "product_stock"); n != 0 {
		t.Fatalf("refused stock writes wrote %d rows", n)
	}
	rec = s.admin(http.MethodPut, stockPath, `{"available":12}`)
	if rec.Code != http.StatusOK || rec.Body.String() != fmt.Sprintf(`{"product_id":%d,"available":12}`, p.ID) {
		t.Fatalf("set stock: %d %s", rec.Code, rec.Body)
	}
	rec = s.do(http.MethodGet, fmt.Sprintf("/products/%d", p.ID), "", "")
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &p))
	if rec.Code != http.StatusOK || p.Available != 12 {
		t.Fatalf("product read: %d %s, want available 12", rec.Code, rec.Body)
	}
	s.PlaceOrder(t, 1, order.Line{ProductID: p.ID, Quantity: 5})
	rec = s.do(http.MethodGet, "/products?brand=b", "", "")
	if !strings.Contains(rec.Body.String(), `"available":7`) {
		t.Fatalf("list after an order of 5: %s, want available 7", rec.Body)
	}
	if rec := s.admin(http.MethodDelete, fmt.Sprintf("/admin/products/%d", p.ID), ""); rec.Code != http.StatusNoContent {
		t.Fatalf("delete: %d", rec.Code)
	}
	if rec := s.admin(http.MethodPut, stockPath, `{"available":5}`); rec.Code != http.StatusNotFound {
		t.Fatalf("stock of a deleted product: %d, want 404", rec.Code)
	}
}

// TestCancelRoute: POST /orders/{no}/cancel answers the owner 200 with the
// cancelled order, and the same on a second cancel; 404 to anyone else; 400
// without a token; 409 for a paid order; 503 with Retry-After when the
// payment service cannot close the charge, the order left WAIT_PAY.
func TestCancelRoute(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	p := s.Product(t, "Kettle", 1500, 10)
	o := s.PlaceOrder(t, 7, order.Line{ProductID: p, Quantity: 2})
	path := "/orders/" + o.No + "/cancel"

	if rec := s.do(http.MethodPost, path, "8", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("another user's cancel: %d %s, want 404", rec.Code, rec.Body)
	}
	if rec := s.do(http.MethodPost, path, "", ""); rec.Code != http.StatusUnauthorized {
		t.Fatalf("cancel without a token: %d, want 401", rec.Code)
	}
	s.Payments.SetDown(true)
	rec := s.do(http.MethodPost, path, "7", "")
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("payment service down: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	problemDoc(t, rec)
	if s.Status(t, o.No) != order.StatusWaitPay || s.Stock(t, p) != 8 {
		t.Fatal("a refused cancel changed the order or the stock")
	}
	s.Payments.SetDown(false)
	var first string
	for i := range 2 {
		rec := s.do(http.MethodPost, path, "7", "")
		got := decode(t, rec)
		if rec.Code != http.StatusOK || got.Status != "CANCELLED" || got.CancelReason != "customer" || got.CancelledAt == nil {
			t.Fatalf("cancel %d: %d %s", i+1, rec.Code, rec.Body)
		}
		if i == 0 {
			first = rec.Body.String()
		} else if rec.Body.String() != first {
			t.Fatalf("the second cancel answered %s, the first %s", rec.Body, first)
		}
	}
	if s.Stock(t, p) != 10 || s.Count(t, "SELECT COUNT(*) FROM local_message WHERE topic = 'order.cancelled'") != 1 {
		t.Fatalf("stock %d after the cancel, want 10, and one order.cancelled", s.Stock(t, p))
	}

	paid := s.PlaceOrder(t, 7, order.Line{ProductID: p, Quantity: 1})
	if _, err := s.Pay(ctx, paid, "P-1"); err != nil {
		t.Fatal(err)
	}
	rec = s.do(http.MethodPost, "/orders/"+paid.No+"/cancel", "7", "")
	if rec.Code != http.StatusConflict || problemDoc(t, rec)["code"] != httpapi.CodeStateConflict {
		t.Fatalf("cancel a paid order: %d %s, want 409 %s", rec.Code, rec.Body, httpapi.CodeStateConflict)
	}
}

// callerToken is the access token of caller, a user id in decimal.
func (s *server) callerToken(caller string) string {
	id, err := strconv.ParseUint(caller, 10, 64)
	testenv.Must(s.t, err)
	return s.Token(s.t, id)
}
