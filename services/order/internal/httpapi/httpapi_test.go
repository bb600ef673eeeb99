package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/order"
	"github.com/oncemall/oncemall/services/order/internal/store"
	"github.com/oncemall/oncemall/services/order/migrations"
)

type wakes struct{ n atomic.Int64 }

func (w *wakes) Wake() { w.n.Add(1) }

type server struct {
	db     *gorm.DB
	wakes  *wakes
	e      *gin.Engine
	app    *app.App
	orders *store.Store
}

// appConfig is the use cases' configuration in these tests: the service's
// defaults.
var appConfig = app.Config{ProductCopy: variant.Fixed, ChunkSize: 100, MaxAllOrNothing: 5000, ReconcileLookback: outbox.DefaultRetention}

func newServer(t *testing.T, opts httpapi.Options) *server {
	return newServerOn(t, testenv.DB(t, migrations.Source, outbox.Migrations, inbox.Migrations), opts, appConfig)
}

// newServerOn serves the routes with opts over db, the use cases
// configured with cfg.
func newServerOn(t *testing.T, db *gorm.DB, opts httpapi.Options, cfg app.Config) *server {
	w := &wakes{}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	orders := store.New(db, w.Wake)
	a, err := app.New(orders, store.NewProducts(db, w.Wake), cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	opts.Log = testenv.Logger(t)
	httpapi.New(a, opts).Register(e)
	return &server{db: db, wakes: w, e: e, app: a, orders: orders}
}

func (s *server) do(method, path, userID, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if userID != "" {
		req.Header.Set(httpapi.UserIDHeader, userID)
	}
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	return rec
}

func (s *server) count(t *testing.T, table string) int64 {
	var n int64
	testenv.Must(t, s.db.Table(table).Count(&n).Error)
	return n
}

// A created order and its order.created event are written together, the
// event carrying the order; the relay is woken after the commit.
func TestCreateOrderWritesOrderAndEventTogether(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	rec := s.do(http.MethodPost, "/orders", "42", `{"items":[{"product_id":1,"quantity":2,"unit_price":1500},{"product_id":9,"quantity":1,"unit_price":99}],"coupon_id":7}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var o httpapi.OrderResponse
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &o))
	if o.Status != "WAIT_PAY" || o.Amount != 3099 || o.UserID != 42 || o.CouponID == nil || *o.CouponID != 7 || len(o.Items) != 2 {
		t.Fatalf("created order: %+v", o)
	}
	if loc := rec.Header().Get("Location"); loc != "/orders/"+o.OrderNo {
		t.Fatalf("Location %q", loc)
	}
	var topic string
	var body []byte
	testenv.Must(t, s.db.Raw("SELECT topic, body FROM local_message WHERE message_no = ?", app.OrderCreatedEventID(o.OrderNo)).Row().Scan(&topic, &body))
	var ev events.OrderCreatedV1
	testenv.Must(t, json.Unmarshal(body, &ev))
	if topic != events.OrderCreated || ev.OrderNo != o.OrderNo || ev.Amount != 3099 || ev.UserID != 42 || ev.CouponID == nil || *ev.CouponID != 7 {
		t.Fatalf("event %s %+v", topic, ev)
	}
	if s.wakes.n.Load() != 1 {
		t.Fatalf("relay woken %d times, want 1", s.wakes.n.Load())
	}

	rec = s.do(http.MethodGet, "/orders/"+o.OrderNo, "", "")
	var got httpapi.OrderResponse
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &got))
	if rec.Code != http.StatusOK || got.OrderNo != o.OrderNo || got.Amount != 3099 || len(got.Items) != 2 {
		t.Fatalf("get: %d %s", rec.Code, rec.Body)
	}
	if rec := s.do(http.MethodPost, "/orders", "42", `{"amount":500}`); rec.Code != http.StatusCreated {
		t.Fatalf("amount-only order: %d %s", rec.Code, rec.Body)
	}
}

// Bad input is answered 400 problem+json and writes nothing: no order, no
// item, no event.
func TestCreateOrderBadInputWritesNothing(t *testing.T) {
	s := newServer(t, httpapi.Options{})
	cases := []struct{ name, user, body string }{
		{"no user header", "", `{"amount":100}`},
		{"user not a number", "abc", `{"amount":100}`},
		{"user zero", "0", `{"amount":100}`},
		{"malformed json", "1", `{"amount":`},
		{"unknown field", "1", `{"amount":100,"coupon":3}`},
		{"trailing data", "1", `{"amount":100} {}`},
		{"neither items nor amount", "1", `{}`},
		{"both", "1", `{"amount":100,"items":[{"product_id":1,"quantity":1,"unit_price":100}]}`},
		{"negative amount", "1", `{"amount":-1}`},
		{"zero quantity", "1", `{"items":[{"product_id":1,"quantity":0,"unit_price":100}]}`},
		{"zero price", "1", `{"items":[{"product_id":1,"quantity":1,"unit_price":0}]}`},
		{"duplicate product", "1", `{"items":[{"product_id":1,"quantity":1,"unit_price":1},{"product_id":1,"quantity":1,"unit_price":1}]}`},
		{"coupon zero", "1", `{"amount":100,"coupon_id":0}`},
		{"string amount", "1", `{"amount":"100"}`},
	}
	for _, c := range cases {
		rec := s.do(http.MethodPost, "/orders", c.user, c.body)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != problem.ContentType {
			t.Errorf("%s: %d %s %s", c.name, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
	for _, table := range []string{"orders", "order_items", "local_message"} {
		if n := s.count(t, table); n != 0 {
			t.Fatalf("bad input wrote %d rows into %s", n, table)
		}
	}
	if s.wakes.n.Load() != 0 {
		t.Fatal("relay woken without a commit")
	}
	if rec := s.do(http.MethodGet, "/orders/nope", "", ""); rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("unknown order: %d %s", rec.Code, rec.Body)
	}
}

// The CompleteInTx seam (store.CompleteInTx plugs the Idempotency-Key
// record in there) runs inside the create transaction with the exact
// response: its write commits with the order, its failure rolls back the
// order and the event, and the client gets byte for byte the body it was
// given.
func TestCreateOrderCompleteInTxSharesTheTransaction(t *testing.T) {
	fail := false
	var stored []byte
	s := newServer(t, httpapi.Options{CompleteInTx: func(ctx context.Context, tx order.Tx, status int, body []byte) error {
		if fail {
			return errors.New("idempotency claim lost")
		}
		stored = body
		return tx.AddEvent(ctx, events.Event{ID: fmt.Sprintf("hook-%d", status), Subject: "hook.record", Payload: json.RawMessage(body)})
	}})
	rec := s.do(http.MethodPost, "/orders", "1", `{"amount":100}`)
	if rec.Code != http.StatusCreated || s.count(t, "local_message") != 2 {
		t.Fatalf("hook write not committed with the order: %d, %d outbox rows", rec.Code, s.count(t, "local_message"))
	}
	if !bytes.Equal(rec.Body.Bytes(), stored) || rec.Header().Get("Content-Type") != httpapi.JSONContentType {
		t.Fatalf("response %q (%s) differs from the stored body %q", rec.Body, rec.Header().Get("Content-Type"), stored)
	}
	fail = true
	if rec := s.do(http.MethodPost, "/orders", "1", `{"amount":100}`); rec.Code != http.StatusInternalServerError {
		t.Fatalf("failing hook: %d", rec.Code)
	}
	if o, m := s.count(t, "orders"), s.count(t, "local_message"); o != 1 || m != 2 {
		t.Fatalf("a failing hook left %d orders and %d outbox rows, want 1 and 2", o, m)
	}
	if w := s.wakes.n.Load(); w != 1 {
		t.Fatalf("relay woken %d times, want once, after the one commit", w)
	}
}
