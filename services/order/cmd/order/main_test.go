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

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
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
	if cfg.HTTPAddr != ":8081" || cfg.Database != "oncemall_order" || cfg.Modes.OrderIdempotency != variant.Fixed || cfg.Modes.ProductCopy != variant.Fixed {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q modes %+v", cfg.HTTPAddr, cfg.Database, cfg.Modes)
	}
	configtest.BadValuesNamed(t, func() error { _, err := service.Load(os.LookupEnv); return err }, configtest.With(map[string]string{
		"ORDER_IDEMPOTENCY_MODE":  "sloppy",
		"PRODUCT_COPY_MODE":       "fast",
		"PRODUCT_COPY_WORKERS":    "0",
		"PRODUCT_COPY_CHUNK_SIZE": "1001",
		"FORM_TOKEN_TTL":          "0s",
		"EVENT_SUBJECT_PREFIX":    ".e2e.",
	}))
	t.Setenv("ONCEMALL_ENV", "dev")
	for _, v := range []string{"ORDER_IDEMPOTENCY_MODE=broken", "PRODUCT_COPY_MODE=orderly", "PRODUCT_COPY_MODE=broken"} {
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
	addr := testenv.FreeAddr(t)
	for k, v := range map[string]string{
		"ONCEMALL_ENV": "lab", "MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"EVENT_SUBJECT_PREFIX": ev.SubjectPrefix, "ADMIN_TOKEN": "order-test-admin-token",
		"IDEMPOTENCY_REDIS_PREFIX": redisPrefix + "idem:", "SHUTDOWN_TIMEOUT": "10s",
	} {
		t.Setenv(k, v)
	}
	db, err := database.Open(context.Background(), mysqlCfg, dbName, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return instance{base: "http://" + addr, db: db, ev: ev, mysql: mysqlCfg, dbName: dbName}
}

// serve runs the service until the test ends and waits for /readyz.
func serve(t *testing.T, base string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, service, nil, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after cancellation")
		}
	})
	testenv.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func count(t *testing.T, db *gorm.DB, query string, args ...any) int {
	t.Helper()
	var n int
	testenv.Must(t, db.Raw(query, args...).Scan(&n).Error)
	return n
}

// post sends body to base+path as user 7 and decodes the JSON answer.
func post(t *testing.T, base, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	testenv.Must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-ID", "7")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	defer resp.Body.Close()
	out := map[string]any{}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: %d %q is not JSON", path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// TestServiceRunsOrdersAndProducts runs the whole service from its
// declaration: POST /orders behind the Idempotency-Key guard writes one
// order for two sends of one key; payment.succeeded, published on the
// deployment's prefixed subject, marks it paid through the consumer and the
// relay publishes order.paid on the prefixed subject; a batch copy travels
// through the outbox, the PRODUCT stream and the copy workers.
func TestServiceRunsOrdersAndProducts(t *testing.T) {
	svc := testService(t)
	base, db, ev := svc.base, svc.db, svc.ev
	serve(t, base)
	ctx := context.Background()
	conn := testenv.NATS(t)

	var orderNo string
	for range 2 {
		status, o := post(t, base, "/orders", "order-main-test-key", `{"amount":1999}`)
		if status != http.StatusCreated {
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
	got, err := paid.Next(jetstream.FetchMaxWait(10 * time.Second))
	testenv.Must(t, err)
	if !bytes.Contains(got.Data(), []byte(orderNo)) {
		t.Fatalf("order.paid carries %s, want order %s", got.Data(), orderNo)
	}

	status, tmpl := post(t, base, "/products/templates", "", `{"templates":[{"brand":"src","name":"Kettle","model":"K-1","price":10},{"brand":"src","name":"Lamp","model":"L-1","price":20}]}`)
	if status != http.StatusCreated {
		t.Fatalf("POST /products/templates: %d %v", status, tmpl)
	}
	status, job := post(t, base, "/products/batch-copy", "", `{"request_id":"main-test","source_brand":"src","target_brand":"shop"}`)
	if status != http.StatusAccepted {
		t.Fatalf("POST /products/batch-copy: %d %v", status, job)
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
