package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/stubs"
)

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "order",
		Dir:      "services/order/cmd/order",
		Vars:     service.Vars(),
		AddrVars: []string{"HTTP_ADDR"},
	})
}

// TestLoadDefaultsAndBadValues: with nothing set the service listens on
// :8081, uses oncemall_order and runs both incidents' fixes; every unusable
// value is refused naming its variable, and a lab variant needs the lab.
func TestLoadDefaultsAndBadValues(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "lab")
	cfg, err := service.Load(os.LookupEnv)
	testenv.Must(t, err)
	if cfg.HTTPAddr != ":8081" || cfg.Database != "oncemall_order" || cfg.Modes.OrderIdempotency != variant.Fixed || cfg.Modes.ProductCopy != variant.Fixed ||
		cfg.Modes.Stock != variant.Fixed || cfg.Modes.Close != variant.Fixed || cfg.Orders.PayTimeout != 15*time.Minute {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q modes %+v", cfg.HTTPAddr, cfg.Database, cfg.Modes)
	}
	configtest.BadValuesNamed(t, func() error { _, err := service.Load(os.LookupEnv); return err }, configtest.With(map[string]string{
		"ORDER_IDEMPOTENCY_MODE":   "sloppy",
		"PRODUCT_COPY_MODE":        "fast",
		"PRODUCT_COPY_WORKERS":     "0",
		"PRODUCT_COPY_CHUNK_SIZE":  "1001",
		"FORM_TOKEN_TTL":           "0s",
		"EVENT_SUBJECT_PREFIX":     ".e2e.",
		"ORDER_STOCK_MODE":         "pessimistic",
		"ORDER_CLOSE_MODE":         "optimistic",
		"ORDER_PAY_TIMEOUT":        "0s",
		"ORDER_CLOSE_SCHEDULE":     "every minute",
		"ORDER_CLOSE_BATCH":        "0",
		"ORDER_RECONCILE_SCHEDULE": "@every",
		"COUPON_URL":               "",
		"COUPON_TIMEOUT":           "-1s",
		"PAYMENT_URL":              "",
		"PAYMENT_TIMEOUT":          "0s",
	}))
	t.Setenv("ONCEMALL_ENV", "dev")
	for _, v := range []string{"ORDER_IDEMPOTENCY_MODE=broken", "PRODUCT_COPY_MODE=orderly", "PRODUCT_COPY_MODE=broken",
		"ORDER_STOCK_MODE=broken", "ORDER_STOCK_MODE=optimistic", "ORDER_CLOSE_MODE=broken"} {
		name, value, _ := strings.Cut(v, "=")
		t.Run(v, func(t *testing.T) {
			t.Setenv(name, value)
			if _, err := service.Load(os.LookupEnv); err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s outside the lab: %v, want a refusal naming it", v, err)
			}
		})
	}
}

// instance is an order service set up by testService.
type instance struct {
	base   string // http://HTTP_ADDR
	db     *gorm.DB
	ev     events.Config // its EVENT_SUBJECT_PREFIX
	mysql  database.Config
	dbName string
}

// testService sets the environment of a whole order service of its own:
// database, listen address, admin token, Redis prefix, and its streams
// under a unique event prefix, deleted when the test ends.
func testService(t *testing.T) instance {
	t.Helper()
	mysqlCfg, dbName := testenv.NewDatabase(t)
	_, redisPrefix := testenv.Redis(t)
	conn := testenv.NATS(t)
	ev := events.Config{SubjectPrefix: strings.ToLower(testenv.UniqueName(t, "order")) + "."}
	for _, root := range service.Streams {
		testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName(root))
	}
	testenv.PublishersStreams(t, conn.JS, ev, "payment")
	addr := testenv.FreeAddr(t)
	issuer = authtest.New(t)
	for k, v := range map[string]string{
		"ONCEMALL_ENV": "lab", "MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"EVENT_SUBJECT_PREFIX": ev.SubjectPrefix, "ADMIN_TOKEN": testAdminToken,
		"IDEMPOTENCY_REDIS_PREFIX": redisPrefix + "idem:", "SHUTDOWN_TIMEOUT": "10s",
		"AUTH_ISSUER": issuer.URL, "AUTH_AUDIENCE": authtest.Audience,
	} {
		t.Setenv(k, v)
	}
	db, err := database.Open(context.Background(), mysqlCfg, dbName, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return instance{base: "http://" + addr, db: db, ev: ev, mysql: mysqlCfg, dbName: dbName}
}

// serve runs the service as main does until the test ends, and waits until
// it is ready.
func serve(t *testing.T, base string) {
	t.Helper()
	testenv.Serve(t, func(ctx context.Context) error { return platform.Run(ctx, service, nil, io.Discard) }, base)
}

func count(t *testing.T, db *gorm.DB, query string, args ...any) int {
	t.Helper()
	var n int
	testenv.Must(t, db.Raw(query, args...).Scan(&n).Error)
	return n
}

// testAdminToken is the ADMIN_TOKEN testService sets.
const testAdminToken = "order-test-admin-token"

// issuer is the identity service of the test's instance (the tests run one
// at a time: they set the environment).
var issuer *authtest.Issuer

// post sends body to base+path as user 7, signed in, and decodes the JSON
// answer.
func post(t *testing.T, base, path, key, body string) (int, map[string]any) {
	t.Helper()
	return send(t, http.MethodPost, base+path, map[string]string{
		"Authorization": "Bearer " + issuer.Token(t, 7, auth.RoleCustomer), "Idempotency-Key": key}, body)
}

// admin sends body to base+path as the operator and decodes the JSON
// answer.
func admin(t *testing.T, method, base, path, body string) (int, map[string]any) {
	t.Helper()
	return send(t, method, base+path, map[string]string{"Authorization": "Bearer " + testAdminToken}, body)
}

// send sends a JSON request with the non-empty headers given and decodes
// the JSON answer.
func send(t *testing.T, method, url string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	status, _, b := testenv.Send(t, method, url, headers, body)
	out := map[string]any{}
	if err := json.Unmarshal([]byte(b), &out); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON", method, url, status, b)
	}
	return status, out
}

// TestServiceRunsOrdersAndProducts runs the whole service from its
// declaration: the operator creates a product with stock; POST /orders
// behind the Idempotency-Key guard writes one order for two sends of one
// key, priced from the catalog; payment.succeeded, published on the
// deployment's prefixed subject, marks it paid through the consumer and
// confirms its stock, and the relay publishes order.paid on the prefixed
// subject; a batch copy travels through the outbox, the PRODUCT stream and
// the copy workers.
func TestServiceRunsOrdersAndProducts(t *testing.T) {
	svc := testService(t)
	base, db, ev := svc.base, svc.db, svc.ev
	serve(t, base)
	ctx := context.Background()
	conn := testenv.NATS(t)

	status, p := admin(t, http.MethodPost, base, "/admin/products", `{"brand":"acme","name":"Kettle","model":"K-100","price":1999}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /admin/products: %d %v", status, p)
	}
	productID := int(p["id"].(float64))
	if status, s := admin(t, http.MethodPut, base, fmt.Sprintf("/admin/products/%d/stock", productID), `{"available":5}`); status != http.StatusOK {
		t.Fatalf("PUT stock: %d %v", status, s)
	}
	var orderNo string
	for range 2 {
		status, o := post(t, base, "/orders", "order-main-test-key", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, productID))
		if status != http.StatusCreated || o["pay_amount"].(float64) != 1999 {
			t.Fatalf("POST /orders: %d %v", status, o)
		}
		orderNo = o["order_no"].(string)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM orders"); n != 1 {
		t.Fatalf("%d orders for one Idempotency-Key, want 1", n)
	}

	paid, err := conn.JS.CreateOrUpdateConsumer(ctx, ev.StreamName(events.OrderPaid), jetstream.ConsumerConfig{FilterSubject: ev.Subject(events.OrderPaid)})
	testenv.Must(t, err)
	body, _ := json.Marshal(events.PaymentSucceededV1{PaymentNo: "P-main", OrderNo: orderNo, Amount: 1999, PaidAt: time.Now().UTC()})
	msg := nats.NewMsg(ev.Subject(events.PaymentSucceeded))
	msg.Data = body
	msg.Header.Set(jetstream.MsgIDHeader, "payment-succeeded-P-main")
	_, err = conn.JS.PublishMsg(ctx, msg)
	testenv.Must(t, err)
	testenv.WaitFor(t, 15*time.Second, "the order to be paid", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'PAID'", orderNo) == 1
	})
	if n := count(t, db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'CONFIRMED'", orderNo); n != 1 {
		t.Fatalf("%d reservations CONFIRMED, want 1", n)
	}
	got, err := paid.Next(jetstream.FetchMaxWait(10 * time.Second))
	testenv.Must(t, err)
	if !bytes.Contains(got.Data(), []byte(orderNo)) {
		t.Fatalf("order.paid carries %s, want order %s", got.Data(), orderNo)
	}

	status, tmpl := admin(t, http.MethodPost, base, "/admin/products/templates", `{"templates":[{"brand":"src","name":"Kettle","model":"K-1","price":10},{"brand":"src","name":"Lamp","model":"L-1","price":20}]}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /admin/products/templates: %d %v", status, tmpl)
	}
	status, job := admin(t, http.MethodPost, base, "/admin/products/batch-copy", `{"request_id":"main-test","source_brand":"src","target_brand":"shop"}`)
	if status != http.StatusAccepted {
		t.Fatalf("POST /admin/products/batch-copy: %d %v", status, job)
	}
	testenv.WaitFor(t, 15*time.Second, "the batch copy to create both products", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM products WHERE brand = 'shop' AND deleted = 0") == 2
	})
	if n := count(t, db, "SELECT COUNT(*) FROM processed_message WHERE consumer = 'order-product-copy'"); n != 1 {
		t.Fatalf("%d batch-copy messages processed, want 1", n)
	}
}

// TestServiceCleansItsInboxTables: the order service runs the platform's
// inbox cleanup, so processed message ids and dead letters past their
// retention are deleted and younger ones kept. (Its processed_message once
// grew without bound because nothing cleaned it.)
func TestServiceCleansItsInboxTables(t *testing.T) {
	svc := testService(t)
	base, db := svc.base, svc.db
	t.Setenv("INBOX_CLEANUP_SCHEDULE", "@every 1s")
	t.Setenv("INBOX_RETENTION", "1h")
	t.Setenv("INBOX_DEAD_RETENTION", "2h")
	testenv.Must(t, platform.Run(context.Background(), service, []string{"migrate"}, io.Discard))
	now := time.Now().UTC()
	for i, at := range []time.Time{now.Add(-90 * time.Minute), now.Add(-30 * time.Minute)} {
		testenv.Must(t, db.Exec("INSERT INTO processed_message (consumer, message_id, processed_at) VALUES ('order-payment-succeeded', ?, ?)", fmt.Sprint("p", i), at).Error)
	}
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-90 * time.Minute)} {
		testenv.Must(t, db.Exec("INSERT INTO dead_message (consumer, message_id, subject, body, reason, deliveries, created_at) VALUES ('order-payment-succeeded', ?, 'payment.succeeded', '{}', 'conflict', 5, ?)", fmt.Sprint("d", i), at).Error)
	}
	serve(t, base)
	testenv.WaitFor(t, 10*time.Second, "the inbox cleanup to delete the old rows", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM processed_message WHERE message_id = 'p0'") == 0 &&
			count(t, db, "SELECT COUNT(*) FROM dead_message WHERE message_id = 'd0'") == 0
	})
	if n := count(t, db, "SELECT COUNT(*) FROM processed_message WHERE message_id = 'p1'"); n != 1 {
		t.Fatal("the young processed id was deleted")
	}
	if n := count(t, db, "SELECT COUNT(*) FROM dead_message WHERE message_id = 'd1'"); n != 1 {
		t.Fatal("the young dead letter was deleted")
	}
}

// TestOutboxOperatorPaths runs `order outbox stats|redrive` and then the
// whole service, checking that it serves the outbox redrive behind the
// admin token.
func TestOutboxOperatorPaths(t *testing.T) {
	svc := testService(t)
	outboxtest.CheckOperatorPaths(t, outboxtest.Service{
		Run: func(ctx context.Context, args []string, stdout io.Writer) error {
			return platform.Run(ctx, service, args, stdout)
		},
		Addr: strings.TrimPrefix(svc.base, "http://"), AdminToken: "order-test-admin-token", MySQL: svc.mysql, DBName: svc.dbName,
	})
}

// TestServiceClosesUnpaidOrders runs the whole service with its jobs
// compressed (ORDER_PAY_TIMEOUT=1s, both jobs every second) and the payment
// service played by a stub that checks INTERNAL_TOKEN: an unpaid order is
// closed by the order-close job after asking the payment service, its stock
// comes back, order.cancelled is published on the prefixed subject, and
// the order-reconcile job exports order_reconcile_findings on /metrics.
func TestServiceClosesUnpaidOrders(t *testing.T) {
	svc := testService(t)
	const internalToken = "order-test-internal-token"
	payments := stubs.NewPaymentService(internalToken)
	defer payments.Close()
	for k, v := range map[string]string{
		"INTERNAL_TOKEN": internalToken, "PAYMENT_URL": payments.URL,
		"ORDER_PAY_TIMEOUT": "1s", "ORDER_CLOSE_SCHEDULE": "@every 1s", "ORDER_RECONCILE_SCHEDULE": "@every 1s",
	} {
		t.Setenv(k, v)
	}
	serve(t, svc.base)
	ctx := context.Background()
	conn := testenv.NATS(t)
	cancelled, err := conn.JS.CreateOrUpdateConsumer(ctx, svc.ev.StreamName(events.OrderCancelled), jetstream.ConsumerConfig{FilterSubject: svc.ev.Subject(events.OrderCancelled)})
	testenv.Must(t, err)

	status, p := admin(t, http.MethodPost, svc.base, "/admin/products", `{"brand":"acme","name":"Lamp","model":"L-7","price":500}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /admin/products: %d %v", status, p)
	}
	productID := int(p["id"].(float64))
	if status, s := admin(t, http.MethodPut, svc.base, fmt.Sprintf("/admin/products/%d/stock", productID), `{"available":3}`); status != http.StatusOK {
		t.Fatalf("PUT stock: %d %v", status, s)
	}
	status, o := post(t, svc.base, "/orders", "close-test-key", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2}]}`, productID))
	if status != http.StatusCreated {
		t.Fatalf("POST /orders: %d %v", status, o)
	}
	orderNo := o["order_no"].(string)
	testenv.WaitFor(t, 15*time.Second, "the order-close job to cancel the order", func() bool {
		return count(t, svc.db, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'CANCELLED' AND cancel_reason = 'timeout'", orderNo) == 1
	})
	if payments.Closes(orderNo) != 1 {
		t.Fatalf("%d close calls to the payment service, want 1", payments.Closes(orderNo))
	}
	if n := count(t, svc.db, "SELECT available FROM product_stock WHERE product_id = ?", productID); n != 3 {
		t.Fatalf("stock %d after the close, want 3", n)
	}
	got, err := cancelled.Next(jetstream.FetchMaxWait(10 * time.Second))
	testenv.Must(t, err)
	var ev events.OrderCancelledV1
	testenv.Must(t, json.Unmarshal(got.Data(), &ev))
	if ev.OrderNo != orderNo || ev.Reason != events.CancelTimeout || ev.UserID != 7 {
		t.Fatalf("order.cancelled %+v", ev)
	}
	testenv.WaitFor(t, 10*time.Second, "order_reconcile_findings on /metrics", func() bool {
		resp, err := http.Get(svc.base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `order_reconcile_findings{kind="cancelled_order_with_unreleased_reservation"} 0`) &&
			strings.Contains(string(b), `job_runs_total{job="order-reconcile",outcome="ok"}`)
	})
}
