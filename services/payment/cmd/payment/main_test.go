package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/config"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
)

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "payment",
		Dir:      "services/payment/cmd/payment",
		Vars:     service.Vars(),
		AddrVars: []string{"HTTP_ADDR"},
	})
}

// lookup is an environment of exactly vars.
func lookup(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

// TestLoadDefaults: on a developer's machine the service needs no variable:
// its port and database come from the declaration, the fixed handler
// without the entry lock, the local simulator and order service.
func TestLoadDefaults(t *testing.T) {
	c, err := service.Load(lookup(map[string]string{"ONCEMALL_ENV": "dev"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8083" || c.Database != "oncemall_payment" {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q", c.HTTPAddr, c.Database)
	}
	if c.Modes.Callback != variant.Fixed || c.PSPURL != "http://127.0.0.1:8090" || c.OrderURL != "http://127.0.0.1:8081" || c.CallbackLock {
		t.Fatalf("defaults: mode %s psp %s order %s lock %v", c.Modes.Callback, c.PSPURL, c.OrderURL, c.CallbackLock)
	}
	// The query starts after 2m and gives up after 1h, past the order's 15m
	// payment deadline; a refund request is leased beyond the platform's
	// timeout.
	if c.QueryAfter != 2*time.Minute || c.QueryHorizon != time.Hour || c.RefundLease <= c.PSPTimeout || c.PSPRefundNotifyURL != "" {
		t.Fatalf("defaults: query after %v, horizon %v, refund lease %v (platform timeout %v), refund notify URL %q",
			c.QueryAfter, c.QueryHorizon, c.RefundLease, c.PSPTimeout, c.PSPRefundNotifyURL)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "lab")
	configtest.BadValuesNamed(t, func() error { _, err := service.Load(os.LookupEnv); return err }, configtest.With(map[string]string{
		"PAYMENT_CALLBACK_MODE":   "lenient",
		"PAYMENT_CALLBACK_WINDOW": "-1s",
		"PSP_TIMEOUT":             "0s",
		"PSP_SECRET":              "",
		"EVENT_SUBJECT_PREFIX":    "nodot",
		"PSP_NOTIFY_URL":          "payment:8083/payments/callback",
		"PSP_REFUND_NOTIFY_URL":   "ftp://payment/refunds",
		"PAYMENT_QUERY_SCHEDULE":  "sometimes",
		"PAYMENT_QUERY_AFTER":     "0s",
		// Not longer than PAYMENT_QUERY_AFTER (2m): nothing would be asked.
		"PAYMENT_QUERY_HORIZON":   "2m",
		"PAYMENT_QUERY_BATCH":     "0",
		"PAYMENT_REFUND_SCHEDULE": "never",
		"PAYMENT_REFUND_BATCH":    "5000",
		// Not longer than PSP_TIMEOUT (5s): a slow request's refund would be
		// claimed again while it is under way.
		"PAYMENT_REFUND_LEASE":       "5s",
		"PAYMENT_REFUND_BACKOFF":     "0s",
		"PAYMENT_REFUND_BACKOFF_MAX": "1s",
		"PAYMENT_REFUND_ALERT_AFTER": "-1m",
	}))
}

// TestLoadGuardsThePSPSecretAndTheBrokenHandler: the published development
// PSP_SECRET runs only on a developer's machine or in the lab, an empty one
// nowhere, and the broken callback handler only in the lab; every refusal
// names its variable and none shows the secret.
func TestLoadGuardsThePSPSecretAndTheBrokenHandler(t *testing.T) {
	const admin, internal, secret = "a-real-admin-token-0123", "a-real-internal-token-0123", "a-real-psp-secret-0123"
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" for success, else a part of the error
	}{
		{"production refuses the dev secret", map[string]string{"ADMIN_TOKEN": admin, "INTERNAL_TOKEN": internal}, "PSP_SECRET"},
		{"production with a real secret", map[string]string{"ADMIN_TOKEN": admin, "INTERNAL_TOKEN": internal, "PSP_SECRET": secret}, ""},
		{"production refuses a short secret", map[string]string{"ADMIN_TOKEN": admin, "INTERNAL_TOKEN": internal, "PSP_SECRET": "short"}, "PSP_SECRET"},
		{"dev allows the dev secret", map[string]string{"ONCEMALL_ENV": "dev"}, ""},
		{"lab allows the dev secret", map[string]string{"ONCEMALL_ENV": "lab"}, ""},
		{"an empty secret is refused even in the lab", map[string]string{"ONCEMALL_ENV": "lab", "PSP_SECRET": ""}, "PSP_SECRET"},
		{"production refuses the broken handler", map[string]string{"ADMIN_TOKEN": admin, "INTERNAL_TOKEN": internal, "PSP_SECRET": secret, "PAYMENT_CALLBACK_MODE": "broken"}, "PAYMENT_CALLBACK_MODE"},
		{"dev refuses the broken handler", map[string]string{"ONCEMALL_ENV": "dev", "PAYMENT_CALLBACK_MODE": "broken"}, "PAYMENT_CALLBACK_MODE"},
		{"lab allows the broken handler", map[string]string{"ONCEMALL_ENV": "lab", "PAYMENT_CALLBACK_MODE": "broken"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := service.Load(lookup(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load: %v, want an error naming %s", err, tc.want)
			case err != nil && strings.Contains(err.Error(), config.DevPSPSecret):
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

// run is the payment command as main runs it.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	return platform.Run(ctx, service, args, stdout)
}

// serviceEnv sets the environment of a payment service in the lab on its
// own database, port, event prefix (its stream deleted at the end) and
// Redis prefix, and returns its base URL, its admin token, its database
// (opened once the service has migrated it) and the MySQL settings.
func serviceEnv(t *testing.T) (base, token, dbName string, mysql database.Config, prefix string) {
	t.Helper()
	mysql, dbName = testenv.NewDatabase(t)
	conn := testenv.NATS(t)
	_, redisPrefix := testenv.Redis(t)
	prefix = strings.ToLower(testenv.UniqueName(t, "p")) + "."
	testenv.DeleteStreamAtCleanup(t, conn.JS, events.Config{SubjectPrefix: prefix}.StreamName("payment"))
	testenv.PublishersStreams(t, conn.JS, events.Config{SubjectPrefix: prefix}, "order")
	addr, token := testenv.FreeAddr(t), "admin-"+testenv.RandomSuffix(12)
	for k, v := range map[string]string{
		"ONCEMALL_ENV": "lab", "MYSQL_ADDR": mysql.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"ADMIN_TOKEN": token, "EVENT_SUBJECT_PREFIX": prefix, "IDEMPOTENCY_REDIS_PREFIX": redisPrefix + "idem:",
		"INTERNAL_TOKEN": "internal-" + testenv.RandomSuffix(12), "PAYMENT_RECONCILE_SCHEDULE": "@every 1s",
		"PAYMENT_QUERY_SCHEDULE": "@every 1s", "PAYMENT_REFUND_SCHEDULE": "@every 1s",
	} {
		t.Setenv(k, v)
	}
	return "http://" + addr, token, dbName, mysql, prefix
}

// serve runs the service as main does until the test ends, and waits until
// it is ready.
func serve(t *testing.T, base string) {
	t.Helper()
	testenv.Serve(t, func(ctx context.Context) error { return run(ctx, nil, io.Discard) }, base)
}

func openDB(t *testing.T, mysql database.Config, name string) *gorm.DB {
	t.Helper()
	db, err := database.Open(context.Background(), mysql, name, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return db
}

func do(t *testing.T, method, url string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	testenv.Must(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunServesThePaymentService runs the whole service from its
// declaration on the production schema: a notification pays a payment once
// (the copy is a duplicate), payment.succeeded reaches the payment stream
// under the event prefix, the close answers only with the internal token,
// order.cancelled is consumed from the order stream under the prefix, the
// reconciliation is empty without the lab's table, and the reconcile, query
// and refund jobs and the callback metrics run.
func TestRunServesThePaymentService(t *testing.T) {
	base, token, dbName, mysql, prefix := serviceEnv(t)
	serve(t, base)
	db := openDB(t, mysql, dbName)
	now := time.Now().UTC()
	testenv.Must(t, db.Exec(`INSERT INTO payments (out_trade_no, order_no, amount, status, created_at, updated_at)
		VALUES ('P-run-1', 'O-run-1', 4200, 'WAIT_PAY', ?, ?)`, now, now).Error)

	body, _ := json.Marshal(psp.Notification{Channel: psp.Channel, PlatformSerial: "T-run-1", OutTradeNo: "P-run-1",
		Amount: 4200, TradeStatus: psp.TradeSuccess, PaidAt: now})
	for _, want := range []string{`"outcome":"processed"`, `"outcome":"duplicate"`} {
		h := http.Header{"Content-Type": {"application/json"}}
		psp.SignHeaders(h, []byte(config.DevPSPSecret), time.Now(), body)
		if status, got := do(t, http.MethodPost, base+"/payments/callback", body, h); status != http.StatusOK || !strings.Contains(got, want) {
			t.Fatalf("callback: %d %s, want 200 %s", status, got, want)
		}
	}

	conn := testenv.NATS(t)
	testenv.WaitFor(t, 10*time.Second, "payment.succeeded in the payment stream", func() bool {
		s, err := conn.JS.Stream(context.Background(), events.Config{SubjectPrefix: prefix}.StreamName("payment"))
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(prefix+events.PaymentSucceeded))
		return err == nil && info.State.Subjects[prefix+events.PaymentSucceeded] == 1
	})

	// The order service's close, behind INTERNAL_TOKEN.
	closePath := base + "/internal/orders/O-run-2/close"
	if status, got := do(t, http.MethodPost, closePath, nil, http.Header{"Authorization": {"Bearer " + token}}); status != http.StatusUnauthorized {
		t.Fatalf("close with the admin token: %d %s, want 401", status, got)
	}
	internal := http.Header{"Authorization": {"Bearer " + os.Getenv("INTERNAL_TOKEN")}}
	if status, got := do(t, http.MethodPost, closePath, nil, internal); status != http.StatusOK || !strings.Contains(got, `"outcome":"closed"`) {
		t.Fatalf("close: %d %s, want 200 closed", status, got)
	}
	// order.cancelled, consumed from the order service's stream.
	cancelled, _ := json.Marshal(events.OrderCancelledV1{OrderNo: "O-run-3", UserID: 7, Reason: events.CancelTimeout, CancelledAt: now})
	_, err := conn.JS.Publish(context.Background(), prefix+events.OrderCancelled, cancelled, jetstream.WithMsgID("order-cancelled-O-run-3"))
	testenv.Must(t, err)
	testenv.WaitFor(t, 10*time.Second, "order.cancelled recorded", func() bool {
		var n int64
		testenv.Must(t, db.Raw("SELECT COUNT(*) FROM payments WHERE order_no = 'O-run-3' AND status = 'CLOSED' AND order_cancelled_at IS NOT NULL").Scan(&n).Error)
		return n == 1
	})

	var labTables int
	testenv.Must(t, db.Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'payment_transaction_broken'").Scan(&labTables).Error)
	if labTables != 0 {
		t.Fatal("the service created the lab's payment_transaction_broken")
	}
	if status, got := do(t, http.MethodGet, base+"/admin/reconcile", nil, http.Header{"Authorization": {"Bearer " + token}}); status != http.StatusOK || !strings.Contains(got, `"empty":true`) {
		t.Fatalf("reconcile: %d %s, want 200 and an empty report", status, got)
	}
	testenv.WaitFor(t, 10*time.Second, "the jobs and the metrics", func() bool {
		_, metrics := do(t, http.MethodGet, base+"/metrics", nil, nil)
		for _, job := range []string{"payment-reconcile", "payment-query", "payment-refund"} {
			if !strings.Contains(metrics, `job_runs_total{job="`+job+`",outcome="ok"} `) {
				return false
			}
		}
		return strings.Contains(metrics, `payment_callbacks_total{handler="fixed",outcome="processed"} 1`) &&
			strings.Contains(metrics, `payment_closes_total{outcome="closed"} 1`) &&
			strings.Contains(metrics, `payment_reconcile_findings{kind="multiple_records"} 0`) &&
			strings.Contains(metrics, `payment_reconcile_findings{kind="stale_wait_pay"} 0`)
	})
}

// TestBrokenModeNeedsTheLabSchema: the broken handler writes a table only
// the lab schema creates, so the service refuses to start in broken mode on
// the production schema, naming the table, and starts once the lab schema
// is applied.
func TestBrokenModeNeedsTheLabSchema(t *testing.T) {
	base, _, dbName, mysql, _ := serviceEnv(t)
	t.Setenv("PAYMENT_CALLBACK_MODE", "broken")
	err := run(context.Background(), nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "payment_transaction_broken") {
		t.Fatalf("broken mode on the production schema: %v, want a refusal naming payment_transaction_broken", err)
	}
	sqlDB, err := openDB(t, mysql, dbName).DB()
	testenv.Must(t, err)
	testenv.Must(t, migrate.Up(context.Background(), sqlDB, paymentlab.Schema))
	serve(t, base)
}

// TestOutboxOperatorPaths runs `payment outbox stats|redrive` and then the
// whole service, checking that the platform serves its outbox redrive
// behind the admin token.
func TestOutboxOperatorPaths(t *testing.T) {
	base, token, dbName, mysql, _ := serviceEnv(t)
	outboxtest.CheckOperatorPaths(t, outboxtest.Service{Run: run, Addr: strings.TrimPrefix(base, "http://"), AdminToken: token, MySQL: mysql, DBName: dbName})
}

// TestHelpListsTheServiceVariables: --help needs no configuration and names
// the service's own variables with their defaults.
func TestHelpListsTheServiceVariables(t *testing.T) {
	t.Setenv("PSP_SECRET", "") // help must not need a valid configuration
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PAYMENT_CALLBACK_MODE", "PSP_SECRET", ":8083", "oncemall_payment", "outbox redrive"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
	if err := run(context.Background(), []string{"serve-please"}, io.Discard); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("unknown command: %v, want an error", err)
	}
}
