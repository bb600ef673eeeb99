package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// run is the command line as main runs it.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	return platform.Run(ctx, service, args, stdout)
}

// labEnv sets the environment of a coupon service of its own: the lab
// environment, a fresh database, a free address, and a unique event prefix
// whose streams are deleted when the test ends. It returns the prefix.
func labEnv(t *testing.T) (events.Config, string) {
	t.Helper()
	mysqlCfg, dbName := testenv.NewDatabase(t)
	ev := events.Config{SubjectPrefix: strings.ToLower(testenv.UniqueName(t, "coupon")) + "."}
	conn := testenv.NATS(t)
	for _, root := range service.Streams {
		testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName(root))
	}
	testenv.PublishersStreams(t, conn.JS, ev, "order")
	addr := testenv.FreeAddr(t)
	issuer = authtest.New(t)
	for k, v := range map[string]string{
		"ONCEMALL_ENV": "lab", "EVENT_SUBJECT_PREFIX": ev.SubjectPrefix,
		"AUTH_ISSUER": issuer.URL, "AUTH_AUDIENCE": authtest.Audience,
		"MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		// The jobs' Redis locks are named the same in every coupon process
		// on this Redis; a short expiry bounds how long a killed run holds
		// one.
		"JOB_LOCK_TTL": "5s",
	} {
		t.Setenv(k, v)
	}
	return ev, addr
}

// issuer is the identity service labEnv set up (the tests run one at a
// time: they set the environment).
var issuer *authtest.Issuer

// TestRunServesConsumesDeductsAndShutsDown starts the whole service as
// `coupon` would and drives each path of a coupon through it: the operator
// issues three coupons, the order service locks them over the internal
// route; order.paid of the first order deducts its coupon, order.cancelled of the second releases its lock, and the
// sweeper releases the third's lock once its deadline passes, since the
// order service (an httptest server checking the internal token) has no such
// order. The reconciliation job exports its gauge. Then the service stops
// with the context, as SIGTERM does.
func TestRunServesConsumesDeductsAndShutsDown(t *testing.T) {
	ev, addr := labEnv(t)
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+platform.DevInternalToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"title":"Not Found","status":404}`))
	}))
	defer orders.Close()
	for k, v := range map[string]string{
		"COUPON_RETRY_SCHEDULE": "@every 1s", "COUPON_SWEEP_SCHEDULE": "@every 1s", "COUPON_RECONCILE_SCHEDULE": "@every 1s",
		"ORDER_PAY_TIMEOUT": "1s", "COUPON_LOCK_MARGIN": "1s", "COUPON_LOCK_TTL": "2s", "COUPON_LOCK_HOLD_LEASE": "1s", "ORDER_URL": orders.URL,
	} {
		t.Setenv(k, v)
	}
	conn := testenv.NATS(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, io.Discard) }()

	base := "http://" + addr
	testenv.WaitFor(t, 30*time.Second, "the service to answer /readyz", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	admin := "Bearer " + platform.DevAdminToken
	internal := "Bearer " + platform.DevInternalToken
	var tpl struct{ ID uint64 }
	post(t, base+"/admin/coupon-templates", admin, `{"name":"10 off","discount_amount":1000}`, http.StatusCreated, &tpl)
	coupons := make([]uint64, 3)
	for i := range coupons {
		var cp struct{ ID uint64 }
		post(t, base+"/admin/coupons", admin, fmt.Sprintf(`{"template_id":%d,"user_id":7}`, tpl.ID), http.StatusCreated, &cp)
		coupons[i] = cp.ID
		var lock struct {
			DiscountAmount int64 `json:"discount_amount"`
		}
		post(t, fmt.Sprintf("%s/internal/coupons/%d/lock", base, cp.ID), internal,
			fmt.Sprintf(`{"order_no":"ORDER-%d","user_id":7,"order_amount":5000}`, i+1), http.StatusOK, &lock)
		if lock.DiscountAmount != 1000 {
			t.Fatalf("lock of coupon %d: discount %d, want 1000", cp.ID, lock.DiscountAmount)
		}
	}

	publish := func(subject, id string, payload any) {
		body, _ := json.Marshal(payload)
		_, err := conn.JS.Publish(ctx, ev.Subject(subject), body, jetstream.WithMsgID(id))
		testenv.Must(t, err)
	}
	publish(events.OrderPaid, "evt-1", events.OrderPaidV1{OrderNo: "ORDER-1", UserID: 7, Amount: 4000, CouponID: &coupons[0], PaymentNo: "P1", PaidAt: time.Now().UTC()})
	publish(events.OrderCancelled, "evt-2", events.OrderCancelledV1{OrderNo: "ORDER-2", UserID: 7, CouponID: &coupons[1], Reason: events.CancelCustomer, CancelledAt: time.Now().UTC()})

	couponIs := func(id uint64, want ...string) func() bool {
		return func() bool {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/coupons/%d", base, id), nil)
			req.Header.Set("Authorization", "Bearer "+issuer.Token(t, 7, auth.RoleCustomer))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			for _, w := range want {
				if !strings.Contains(string(b), w) {
					return false
				}
			}
			return true
		}
	}
	testenv.WaitFor(t, 15*time.Second, "the first coupon to be USED by ORDER-1", couponIs(coupons[0], `"status":"USED"`, `"used_order_no":"ORDER-1"`))
	testenv.WaitFor(t, 15*time.Second, "the cancelled order's coupon to be released", couponIs(coupons[1], `"status":"UNUSED"`))
	testenv.WaitFor(t, 15*time.Second, "the sweeper to release the lock of the order that never committed", couponIs(coupons[2], `"status":"UNUSED"`))
	testenv.WaitFor(t, 15*time.Second, "coupon_reconcile_findings on /metrics", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `coupon_reconcile_findings{kind="lock_overdue"} 0`) &&
			strings.Contains(string(b), `job_runs_total{job="coupon-reconcile",outcome="ok"}`)
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// TestOutboxOperatorPaths runs `coupon outbox stats|redrive` and then the
// whole service as `coupon` would, checking that it serves the outbox
// redrive behind the admin token.
func TestOutboxOperatorPaths(t *testing.T) {
	labEnv(t)
	mysqlCfg := testenv.Config(t).MySQL
	token := "admin-" + testenv.RandomSuffix(12)
	t.Setenv("ADMIN_TOKEN", token)
	outboxtest.CheckOperatorPaths(t, outboxtest.Service{Run: run, Addr: os.Getenv("HTTP_ADDR"), AdminToken: token,
		MySQL: mysqlCfg, DBName: os.Getenv("MYSQL_DATABASE")})
}

// The relay takes the OUTBOX_* settings: an unusable poll schedule stops
// the start-up, naming it.
func TestRunReadsTheOutboxSettings(t *testing.T) {
	labEnv(t)
	t.Setenv("OUTBOX_POLL_SCHEDULE", "every now and then")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "every now and then") {
		t.Fatalf("run with OUTBOX_POLL_SCHEDULE unusable: %v, want the relay's schedule error", err)
	}
}

// TestLoadDefaults: the declaration gives the service its port and its
// database.
func TestLoadDefaults(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "lab")
	c, err := service.Load(os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8082" || c.Database != "oncemall_coupon" {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q", c.HTTPAddr, c.Database)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "lab")
	configtest.BadValuesNamed(t, func() error { _, err := service.Load(os.LookupEnv); return err }, configtest.With(map[string]string{
		"COUPON_DEDUCTION_MODE":     "sometimes",
		"COUPON_RETRY_SCHEDULE":     "often",
		"COUPON_RETRY_MAX":          "0",
		"COUPON_LOCK_TTL":           "5m",
		"COUPON_SWEEP_SCHEDULE":     "whenever",
		"COUPON_RECONCILE_SCHEDULE": "hourly-ish",
		"ORDER_URL":                 "",
	}))
}

// TestBrokenDeductionRunsOnlyInTheLab: the incident's deduction is refused
// everywhere but ONCEMALL_ENV=lab, with an error naming its variable.
func TestBrokenDeductionRunsOnlyInTheLab(t *testing.T) {
	t.Setenv("COUPON_DEDUCTION_MODE", "broken")
	for env, allowed := range map[string]bool{"lab": true, "dev": false, "production": false} {
		t.Setenv("ONCEMALL_ENV", env)
		t.Setenv("ADMIN_TOKEN", "a-real-secret-of-some-length")
		_, err := service.Load(os.LookupEnv)
		switch {
		case allowed && err != nil:
			t.Errorf("ONCEMALL_ENV=%s: %v, want the broken deduction allowed", env, err)
		case !allowed && (err == nil || !strings.Contains(err.Error(), "COUPON_DEDUCTION_MODE")):
			t.Errorf("ONCEMALL_ENV=%s: %v, want a refusal naming COUPON_DEDUCTION_MODE", env, err)
		}
	}
}

func TestHelpListsTheCouponVariables(t *testing.T) {
	var out bytes.Buffer
	testenv.Must(t, run(context.Background(), []string{"--help"}, &out))
	for _, want := range []string{"COUPON_DEDUCTION_MODE", "COUPON_RETRY_SCHEDULE", "COUPON_LOCK_TTL",
		"ORDER_PAY_TIMEOUT", "COUPON_SWEEP_SCHEDULE", "COUPON_RECONCILE_SCHEDULE", "ORDER_URL", ":8082", "oncemall_coupon"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "coupon",
		Dir:      "services/coupon/cmd/coupon",
		Vars:     service.Vars(),
		AddrVars: []string{"HTTP_ADDR"},
	})

	// Beyond the generic rules: by default the coupon service reaches
	// MySQL directly and the fault proxy is not started (it answers /arm,
	// so it runs only in the lab profile); COUPON_MYSQL_ADDR routes the
	// service through it, so an operator can lose a COMMIT reply of the
	// running stack through the proxy's admin API (incident 1).
	f := composecheck.RepoCompose(t)
	if got := f.Services["coupon"].Environment["MYSQL_ADDR"]; got != "${COUPON_MYSQL_ADDR:-mysql:3306}" {
		t.Errorf("coupon: MYSQL_ADDR = %q, want %q (MySQL, unless routed through the fault proxy)", got, "${COUPON_MYSQL_ADDR:-mysql:3306}")
	}
	if got := f.Services["faultproxy"].Profiles; !slices.Equal(got, []string{"lab"}) {
		t.Errorf("faultproxy: profiles %q, want [lab]: a proxy that answers /arm must not run by default", got)
	}
	if got := f.Services["faultproxy"].Environment["FAULTPROXY_ADDR"]; got != ":3307" {
		t.Errorf("faultproxy: FAULTPROXY_ADDR = %q, want %q, where COUPON_MYSQL_ADDR=faultproxy:3307 connects", got, ":3307")
	}
}

func post(t *testing.T, url, authorization, body string, status int, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	testenv.Must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authorization)
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s, want %d", url, resp.StatusCode, b, status)
	}
	testenv.Must(t, json.NewDecoder(resp.Body).Decode(out))
}
