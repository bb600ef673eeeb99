package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/store"
)

const adminToken = "reconcile-test-token"

// reconcile calls GET /admin/reconcile with the given Authorization header
// value (none when empty).
func (s *server) reconcile(auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/admin/reconcile", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	s.e.ServeHTTP(rec, req)
	return rec
}

// anomalies returns the findings of an authorized GET /admin/reconcile,
// sorted by kind, order and message.
func (s *server) anomalies(t *testing.T) []httpapi.AnomalyResponse {
	t.Helper()
	rec := s.reconcile("Bearer " + adminToken)
	if rec.Code != http.StatusOK {
		t.Fatalf("reconcile: %d %s", rec.Code, rec.Body)
	}
	var out httpapi.ReconcileResponse
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &out))
	if out.Anomalies == nil {
		t.Fatalf("reconcile answered %s: want an anomalies list, [] when empty", rec.Body)
	}
	slices.SortFunc(out.Anomalies, func(a, b httpapi.AnomalyResponse) int {
		return strings.Compare(a.Kind+a.OrderNo+a.MessageID, b.Kind+b.OrderNo+b.MessageID)
	})
	return out.Anomalies
}

// createOrder creates an order of amount cents for user 7 and returns its
// number.
func (s *server) createOrder(t *testing.T, amount int) string {
	t.Helper()
	rec := s.do(http.MethodPost, "/orders", "7", fmt.Sprintf(`{"amount":%d}`, amount))
	if rec.Code != http.StatusCreated {
		t.Fatalf("create order: %d %s", rec.Code, rec.Body)
	}
	var o httpapi.OrderResponse
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &o))
	return o.OrderNo
}

// pay applies payment.succeeded to order no the way the consumer does: the
// use case inside one transaction.
func (s *server) pay(t *testing.T, no string, amount int64) {
	t.Helper()
	err := store.New(s.db).Transaction(context.Background(), func(tx *gorm.DB) error {
		_, err := s.app.MarkOrderPaid(context.Background(), tx, events.PaymentSucceededV1{
			PaymentNo: "P-" + no, OrderNo: no, Amount: amount, PaidAt: time.Now().UTC()})
		return err
	})
	testenv.Must(t, err)
}

// deadLetter records a message in the inbox's dead letters, as the
// consumer does when it gives a message up.
func (s *server) deadLetter(t *testing.T, id, subject, body, reason string) {
	t.Helper()
	testenv.Must(t, s.db.Exec(`INSERT INTO dead_message (consumer, message_id, subject, body, reason, deliveries, created_at)
		VALUES ('order-payment-succeeded', ?, ?, ?, ?, 5, NOW(3))`, id, subject, []byte(body), reason).Error)
}

// TestReconcileRequiresTheAdminToken: without the token, or with another
// one, the reconciler answers 401 and reveals nothing.
func TestReconcileRequiresTheAdminToken(t *testing.T) {
	s := newServer(t, httpapi.Options{AdminToken: adminToken})
	for _, auth := range []string{"", "Bearer wrong", adminToken} {
		if rec := s.reconcile(auth); rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "anomalies") {
			t.Errorf("Authorization %q: %d %s, want 401", auth, rec.Code, rec.Body)
		}
	}
	if rec := s.reconcile("Bearer " + adminToken); rec.Code != http.StatusOK {
		t.Fatalf("with the token: %d %s", rec.Code, rec.Body)
	}
	// A service started without ADMIN_TOKEN refuses every caller.
	open := newServer(t, httpapi.Options{})
	if rec := open.reconcile("Bearer "); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no admin token configured: %d %s, want 401", rec.Code, rec.Body)
	}
}

// TestReconcileIsEmptyAfterACleanFlow: orders created and paid through the
// use cases, and dead letters of other consumers, leave the reconciler
// with exactly {"anomalies":[]}.
func TestReconcileIsEmptyAfterACleanFlow(t *testing.T) {
	s := newServer(t, httpapi.Options{AdminToken: adminToken})
	paid := s.createOrder(t, 3000)
	s.pay(t, paid, 3000)
	s.pay(t, paid, 3000)  // a duplicate notification changes nothing
	s.createOrder(t, 500) // still waiting for payment
	s.deadLetter(t, "copy-1", "product.copy.chunk", `{"job":1}`, "not a payment")

	rec := s.reconcile("Bearer " + adminToken)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"anomalies":[]}` {
		t.Fatalf("reconcile after a clean flow: %d %s, want 200 {\"anomalies\":[]}", rec.Code, rec.Body)
	}
}

// TestReconcileFindsEachAnomaly writes each broken invariant directly, as a
// manual fix or a bug would, and expects the reconciler to list each one,
// and nothing that holds.
func TestReconcileFindsEachAnomaly(t *testing.T) {
	s := newServer(t, httpapi.Options{AdminToken: adminToken})

	// Paid through the use case: consistent, not reported.
	clean := s.createOrder(t, 1000)
	s.pay(t, clean, 1000)

	// PAID without its order.paid row.
	silent := s.createOrder(t, 2000)
	testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = 'P-manual', paid_at = NOW(3) WHERE order_no = ?", silent).Error)
	// The same, but paid before the outbox retention: its sent event may
	// have been cleaned up, so it is not reported.
	old := s.createOrder(t, 2100)
	testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = 'P-old', paid_at = ? WHERE order_no = ?",
		time.Now().UTC().Add(-outbox.DefaultRetention-time.Hour), old).Error)

	// An order.paid row for an order still waiting for payment, and one for
	// an order that does not exist.
	waiting := s.createOrder(t, 3000)
	for _, no := range []string{waiting, "O-ghost"} {
		msg, err := outbox.JSON(app.OrderPaidEventID(no), events.OrderPaid, events.OrderPaidV1{OrderNo: no, UserID: 7, Amount: 3000})
		testenv.Must(t, err)
		testenv.Must(t, outbox.Add(s.db, msg))
	}

	// Dead-lettered payment.succeeded messages: one naming the waiting
	// order, one whose body is not even JSON; a dead letter of another
	// subject is not a payment and not reported.
	s.deadLetter(t, "pay-1", events.PaymentSucceeded, `{"payment_no":"P-x","order_no":"`+waiting+`","amount":2999}`, "payment amount does not match the order")
	s.deadLetter(t, "pay-2", events.PaymentSucceeded, `{"order_no":`, "decode: unexpected end of JSON input")
	s.deadLetter(t, "copy-1", "product.copy.chunk", `{"job":1}`, "not a payment")

	got := s.anomalies(t)
	want := []httpapi.AnomalyResponse{
		{Kind: "order_paid_event_without_paid_order", OrderNo: "O-ghost", MessageID: app.OrderPaidEventID("O-ghost")},
		{Kind: "order_paid_event_without_paid_order", OrderNo: waiting, Status: "WAIT_PAY", MessageID: app.OrderPaidEventID(waiting)},
		{Kind: "paid_order_without_order_paid_event", OrderNo: silent, Status: "PAID", MessageID: app.OrderPaidEventID(silent)},
		{Kind: "payment_succeeded_dead_lettered", MessageID: "pay-2", Reason: "decode: unexpected end of JSON input"},
		{Kind: "payment_succeeded_dead_lettered", OrderNo: waiting, Status: "WAIT_PAY", MessageID: "pay-1", Reason: "payment amount does not match the order"},
	}
	slices.SortFunc(want, func(a, b httpapi.AnomalyResponse) int {
		return strings.Compare(a.Kind+a.OrderNo+a.MessageID, b.Kind+b.OrderNo+b.MessageID)
	})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies:\n got %+v\nwant %+v", got, want)
	}
}
