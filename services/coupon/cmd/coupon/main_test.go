package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestRunServesConsumesDeductsAndShutsDown starts the whole service as
// `coupon` would (own database, streams and consumer names), issues a coupon
// over HTTP, publishes order.paid, waits for the cron to deduct and the relay
// to publish coupon.used, then stops it with the context, as SIGTERM does.
func TestRunServesConsumesDeductsAndShutsDown(t *testing.T) {
	mysqlCfg, dbName := testenv.NewDatabase(t)
	conn := testenv.NATS(t)
	orderStream, eventStream := testenv.UniqueName(t, "ORDER"), testenv.UniqueName(t, "COUPON")
	orderPrefix, eventPrefix := testenv.UniqueName(t, "order"), testenv.UniqueName(t, "coupon")
	testenv.DeleteStreamAtCleanup(t, conn.JS, orderStream)
	testenv.DeleteStreamAtCleanup(t, conn.JS, eventStream)
	addr := testenv.FreeAddr(t)
	for k, v := range map[string]string{
		"MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"COUPON_ORDER_STREAM": orderStream, "COUPON_ORDER_SUBJECT_PREFIX": orderPrefix,
		"COUPON_EVENT_STREAM": eventStream, "COUPON_EVENT_SUBJECT_PREFIX": eventPrefix,
		"COUPON_CONSUMER_NAME": testenv.UniqueName(t, "coupon"), "COUPON_RETRY_SCHEDULE": "@every 1s",
	} {
		t.Setenv(k, v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, io.Discard) }()

	base := "http://" + addr
	testenv.WaitFor(t, 30*time.Second, "the service to answer /healthz", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	var tpl, cp struct{ ID uint64 }
	post(t, base+"/coupon-templates", `{"name":"10 off","discount_amount":1000}`, &tpl)
	post(t, base+"/coupons", fmt.Sprintf(`{"template_id":%d,"user_id":7}`, tpl.ID), &cp)

	body, _ := json.Marshal(events.OrderPaidV1{OrderNo: "ORDER-1", UserID: 7, Amount: 5000, CouponID: &cp.ID, PaymentNo: "P1", PaidAt: time.Now().UTC()})
	_, err := conn.JS.Publish(ctx, orderPrefix+".paid", body, jetstream.WithMsgID("evt-1"))
	testenv.Must(t, err)

	testenv.WaitFor(t, 15*time.Second, "the coupon to be USED by ORDER-1", func() bool {
		resp, err := http.Get(fmt.Sprintf("%s/coupons/%d", base, cp.ID))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"status":"USED"`) && strings.Contains(string(b), `"used_order_no":"ORDER-1"`)
	})
	testenv.WaitFor(t, 15*time.Second, "coupon.used on the event stream", func() bool {
		s, err := conn.JS.Stream(ctx, eventStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1
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
// whole service as `coupon` would, checking that its engine serves the
// outbox redrive behind the admin token.
func TestOutboxOperatorPaths(t *testing.T) {
	mysqlCfg, dbName := testenv.NewDatabase(t)
	addr, token := testenv.FreeAddr(t), "admin-"+testenv.RandomSuffix(12)
	for k, v := range uniqueEnv(t, mysqlCfg.Addr, dbName, addr) {
		t.Setenv(k, v)
	}
	t.Setenv("ADMIN_TOKEN", token)
	outboxtest.CheckOperatorPaths(t, outboxtest.Service{Run: run, Addr: addr, AdminToken: token, MySQL: mysqlCfg, DBName: dbName})
}

// The relay takes the OUTBOX_* settings: an unusable poll schedule stops
// the start-up (with the relay's defaults hard-wired, it was ignored).
func TestRunReadsTheOutboxSettings(t *testing.T) {
	mysqlCfg, dbName := testenv.NewDatabase(t)
	for k, v := range uniqueEnv(t, mysqlCfg.Addr, dbName, testenv.FreeAddr(t)) {
		t.Setenv(k, v)
	}
	t.Setenv("OUTBOX_POLL_SCHEDULE", "every now and then")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "every now and then") {
		t.Fatalf("run with OUTBOX_POLL_SCHEDULE unusable: %v, want the relay's schedule error", err)
	}
}

// uniqueEnv is the environment of a coupon service on its own database,
// address, streams, subjects and consumer, whose streams are deleted when
// the test ends.
func uniqueEnv(t *testing.T, mysqlAddr, dbName, addr string) map[string]string {
	conn := testenv.NATS(t)
	orderStream, eventStream := testenv.UniqueName(t, "ORDER"), testenv.UniqueName(t, "COUPON")
	testenv.DeleteStreamAtCleanup(t, conn.JS, orderStream)
	testenv.DeleteStreamAtCleanup(t, conn.JS, eventStream)
	return map[string]string{
		"MYSQL_ADDR": mysqlAddr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"COUPON_ORDER_STREAM": orderStream, "COUPON_ORDER_SUBJECT_PREFIX": testenv.UniqueName(t, "order"),
		"COUPON_EVENT_STREAM": eventStream, "COUPON_EVENT_SUBJECT_PREFIX": testenv.UniqueName(t, "coupon"),
		"COUPON_CONSUMER_NAME": testenv.UniqueName(t, "coupon"),
	}
}

func post(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewBufferString(body))
	testenv.Must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	testenv.Must(t, json.NewDecoder(resp.Body).Decode(out))
}
