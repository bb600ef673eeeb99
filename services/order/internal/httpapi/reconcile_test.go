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

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/app"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
	"github.com/oncemall/oncemall/services/order/internal/messaging"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

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
	sortAnomalies(out.Anomalies)
	return out.Anomalies
}

// createOrder creates an order of one product priced amount cents for user
// 7 and returns its number.
func (s *server) createOrder(t *testing.T, amount int) string {
	t.Helper()
	product := s.Product(t, fmt.Sprintf("P-%d-%d", amount, s.count(t, "products")), int64(amount), 10)
	rec := s.do(http.MethodPost, "/orders", "7", fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, product))
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
	s.payAt(t, no, amount, time.Now().UTC())
}

// payAt is pay with the payment platform's paid_at.
func (s *server) payAt(t *testing.T, no string, amount int64, paidAt time.Time) {
	t.Helper()
	ctx := context.Background()
	err := s.orders.InTx(ctx, func(tx order.Tx) error {
		_, err := s.app.MarkOrderPaid(ctx, tx, no, order.Payment{No: "P-" + no, Amount: amount, PaidAt: paidAt})
		return err
	})
	testenv.Must(t, err)
}

// confirm confirms order no's reservations by hand, as a manual fix that
// marks an order paid would, so that the test sees only the anomaly it is
// about.
func confirm(t *testing.T, s *server, no string) {
	t.Helper()
	testenv.Must(t, s.db.Exec("UPDATE stock_reservation SET status = 'CONFIRMED' WHERE order_no = ?", no).Error)
}

// productCopyConsumer is the batch-copy consumer: another consumer
// recording dead letters in the same table.
const productCopyConsumer = messaging.ProductCopyConsumer

// deadLetter is a dead_message row as the inbox writes it when consumer
// gives message id up.
type deadLetter struct {
	consumer, id, subject, body, reason string
	// at is created_at; zero means now.
	at time.Time
}

// bury records d in the inbox's dead letters.
func (s *server) bury(t *testing.T, d deadLetter) {
	t.Helper()
	if d.at.IsZero() {
		d.at = time.Now().UTC()
	}
	testenv.Must(t, s.db.Exec(`INSERT INTO dead_message (consumer, message_id, subject, body, reason, deliveries, created_at)
		VALUES (?, ?, ?, ?, ?, 5, ?)`, d.consumer, d.id, d.subject, []byte(d.body), d.reason, d.at.UTC()).Error)
}

// sortAnomalies sorts as by kind, order and message, as anomalies returns
// them.
func sortAnomalies(as []httpapi.AnomalyResponse) {
	slices.SortFunc(as, func(a, b httpapi.AnomalyResponse) int {
		return strings.Compare(a.Kind+a.OrderNo+a.MessageID, b.Kind+b.OrderNo+b.MessageID)
	})
}

// TestReconcileRequiresTheAdminToken: without the token, or with another
// one, the reconciler answers 401 and reveals nothing.
func TestReconcileRequiresTheAdminToken(t *testing.T) {
	s := newServer(t)
	for _, auth := range []string{"", "Bearer wrong", adminToken} {
		if rec := s.reconcile(auth); rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "anomalies") {
			t.Errorf("Authorization %q: %d %s, want 401", auth, rec.Code, rec.Body)
		}
	}
	if rec := s.reconcile("Bearer " + adminToken); rec.Code != http.StatusOK {
		t.Fatalf("with the token: %d %s", rec.Code, rec.Body)
	}
	// Handlers built without an admin guard refuse every caller.
	open := s.unguarded(t)
	if rec := open.reconcile("Bearer "); rec.Code != http.StatusUnauthorized {
		t.Fatalf("no admin token configured: %d %s, want 401", rec.Code, rec.Body)
	}
}

// TestReconcileIsEmptyAfterACleanFlow: orders created and paid, or
// cancelled, through the use cases, and dead letters of other consumers,
// leave the reconciler with exactly {"anomalies":[]}.
func TestReconcileIsEmptyAfterACleanFlow(t *testing.T) {
	s := newServer(t)
	paid := s.createOrder(t, 3000)
	s.pay(t, paid, 3000)
	s.pay(t, paid, 3000)  // a duplicate notification changes nothing
	s.createOrder(t, 500) // still waiting for payment
	cancelled := s.createOrder(t, 700)
	if rec := s.do(http.MethodPost, "/orders/"+cancelled+"/cancel", "7", ""); rec.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	s.bury(t, deadLetter{consumer: productCopyConsumer, id: "copy-1", subject: "product.batch_copy", body: `{"job":1}`, reason: "not a payment"})

	rec := s.reconcile("Bearer " + adminToken)
	if rec.Code != http.StatusOK || rec.Body.String() != `{"anomalies":[]}` {
		t.Fatalf("reconcile after a clean flow: %d %s, want 200 {\"anomalies\":[]}", rec.Code, rec.Body)
	}
}

// TestReconcileFindsEachAnomaly writes each broken invariant directly, as a
// manual fix or a bug would, and expects the reconciler to list each one,
// and nothing that holds.
func TestReconcileFindsEachAnomaly(t *testing.T) {
	s := newServer(t)

	// Paid through the use case: consistent, not reported.
	clean := s.createOrder(t, 1000)
	s.pay(t, clean, 1000)

	// PAID without its order.paid row.
	now := time.Now().UTC()
	silent := s.createOrder(t, 2000)
	testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = 'P-manual', paid_at = ?, updated_at = ? WHERE order_no = ?",
		now, now, silent).Error)
	confirm(t, s, silent)
	// The same, but paid before the outbox retention: its sent event may
	// have been cleaned up, so it is not reported.
	old := s.createOrder(t, 2100)
	beforeRetention := now.Add(-outbox.DefaultRetention - time.Hour)
	testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = 'P-old', paid_at = ?, updated_at = ? WHERE order_no = ?",
		beforeRetention, beforeRetention, old).Error)
	confirm(t, s, old)

	// An order.paid row for an order still waiting for payment, and one for
	// an order that does not exist.
	waiting := s.createOrder(t, 3000)
	for _, no := range []string{waiting, "O-ghost"} {
		msg, err := outbox.JSON(app.OrderPaidEventID(no), events.OrderPaid, events.OrderPaidV1{OrderNo: no, UserID: 7, Amount: 3000})
		testenv.Must(t, err)
		testenv.Must(t, outbox.Add(s.db, msg))
	}

	// Dead letters of the payment.succeeded consumer: one naming the
	// waiting order, one whose body is not even JSON. Not reported: one
	// recorded before the lookback (taken as handled), and those of another
	// consumer, whatever their subject, since only this consumer marks
	// orders paid.
	s.bury(t, deadLetter{consumer: app.PaymentSucceededConsumer, id: "pay-1", subject: events.PaymentSucceeded,
		body: `{"payment_no":"P-x","order_no":"` + waiting + `","amount":2999}`, reason: "payment amount does not match the order"})
	s.bury(t, deadLetter{consumer: app.PaymentSucceededConsumer, id: "pay-2", subject: events.PaymentSucceeded,
		body: `{"order_no":`, reason: "decode: unexpected end of JSON input"})
	s.bury(t, deadLetter{consumer: app.PaymentSucceededConsumer, id: "pay-old", subject: events.PaymentSucceeded,
		body: `{"order_no":"` + waiting + `"}`, reason: "handled long ago", at: beforeRetention})
	s.bury(t, deadLetter{consumer: productCopyConsumer, id: "copy-1", subject: "product.batch_copy", body: `{"job":1}`, reason: "not a payment"})
	s.bury(t, deadLetter{consumer: "order-payment-audit", id: "pay-1", subject: events.PaymentSucceeded,
		body: `{"order_no":"` + waiting + `"}`, reason: "another consumer's failure"})

	got := s.anomalies(t)
	want := []httpapi.AnomalyResponse{
		{Kind: "order_paid_event_without_paid_order", OrderNo: "O-ghost", MessageID: app.OrderPaidEventID("O-ghost")},
		{Kind: "order_paid_event_without_paid_order", OrderNo: waiting, Status: "WAIT_PAY", MessageID: app.OrderPaidEventID(waiting)},
		{Kind: "paid_order_without_order_paid_event", OrderNo: silent, Status: "PAID", MessageID: app.OrderPaidEventID(silent)},
		{Kind: "payment_succeeded_dead_lettered", MessageID: "pay-2", Reason: "decode: unexpected end of JSON input"},
		{Kind: "payment_succeeded_dead_lettered", OrderNo: waiting, Status: "WAIT_PAY", MessageID: "pay-1", Reason: "payment amount does not match the order"},
	}
	sortAnomalies(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies:\n got %+v\nwant %+v", got, want)
	}
}

// TestReconcileLooksBackOnTheOrderServiceClock: with a 1h lookback, a paid
// order counts by when this service marked it paid (updated_at), not by the
// payment platform's paid_at, and a dead letter by when it was recorded.
// Reported: an order paid 30 min ago without its event, one whose late
// notification was applied just now although the platform paid it 2h ago,
// and a dead letter of 30 min ago. Not reported: an order marked paid 2h ago
// whose platform clock runs 2h ahead (its paid_at says now), and a dead
// letter of 2h ago.
func TestReconcileLooksBackOnTheOrderServiceClock(t *testing.T) {
	s := newServerWith(t, map[string]string{"OUTBOX_RETENTION": "1h"}, assembly.Options{})
	now := time.Now().UTC()
	markPaid := func(no string, paidAt, updatedAt time.Time) {
		testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = ?, paid_at = ?, updated_at = ? WHERE order_no = ?",
			"P-"+no, paidAt, updatedAt, no).Error)
		confirm(t, s, no)
	}

	recent := s.createOrder(t, 1000)
	markPaid(recent, now.Add(-30*time.Minute), now.Add(-30*time.Minute))
	ahead := s.createOrder(t, 1100)
	markPaid(ahead, now, now.Add(-2*time.Hour))

	// Paid through the use case, which stamps updated_at itself; the event
	// is then lost (a bug, a manual delete).
	late := s.createOrder(t, 1200)
	s.payAt(t, late, 1200, now.Add(-2*time.Hour))
	testenv.Must(t, s.db.Exec("DELETE FROM local_message WHERE message_no = ?", app.OrderPaidEventID(late)).Error)

	for id, at := range map[string]time.Time{"pay-new": now.Add(-30 * time.Minute), "pay-old": now.Add(-2 * time.Hour)} {
		s.bury(t, deadLetter{consumer: app.PaymentSucceededConsumer, id: id, subject: events.PaymentSucceeded,
			body: `{"order_no":"O-unknown"}`, reason: "order not found", at: at})
	}

	got := s.anomalies(t)
	want := []httpapi.AnomalyResponse{
		{Kind: "paid_order_without_order_paid_event", OrderNo: recent, Status: "PAID", MessageID: app.OrderPaidEventID(recent)},
		{Kind: "paid_order_without_order_paid_event", OrderNo: late, Status: "PAID", MessageID: app.OrderPaidEventID(late)},
		{Kind: "payment_succeeded_dead_lettered", OrderNo: "O-unknown", MessageID: "pay-new", Reason: "order not found"},
	}
	sortAnomalies(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies with a 1h lookback:\n got %+v\nwant %+v", got, want)
	}
}

// TestReconcileFindsUnbalancedReservations: a PAID order whose reservation
// is still RESERVED or was RELEASED, and a CANCELLED order whose
// reservation is RESERVED or CONFIRMED, are each reported with the product
// and the reservation's status; the gauge order_reconcile_findings counts
// them by kind, and drops back to zero once they are repaired.
func TestReconcileFindsUnbalancedReservations(t *testing.T) {
	s := newServer(t)
	product := func(no string) uint64 {
		var id uint64
		testenv.Must(t, s.db.Raw("SELECT product_id FROM stock_reservation WHERE order_no = ?", no).Row().Scan(&id))
		return id
	}
	paidReserved, paidReleased := s.createOrder(t, 1000), s.createOrder(t, 1100)
	cancelledReserved, cancelledConfirmed := s.createOrder(t, 1200), s.createOrder(t, 1300)
	now := time.Now().UTC()
	for _, no := range []string{paidReserved, paidReleased} {
		testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'PAID', payment_no = ?, paid_at = ?, updated_at = ? WHERE order_no = ?", "P-"+no, now, now, no).Error)
		msg, err := outbox.JSON(app.OrderPaidEventID(no), events.OrderPaid, events.OrderPaidV1{OrderNo: no})
		testenv.Must(t, err)
		testenv.Must(t, outbox.Add(s.db, msg))
	}
	for _, no := range []string{cancelledReserved, cancelledConfirmed} {
		testenv.Must(t, s.db.Exec("UPDATE orders SET status = 'CANCELLED', cancelled_at = ?, updated_at = ? WHERE order_no = ?", now, now, no).Error)
	}
	testenv.Must(t, s.db.Exec("UPDATE stock_reservation SET status = 'RELEASED' WHERE order_no = ?", paidReleased).Error)
	testenv.Must(t, s.db.Exec("UPDATE stock_reservation SET status = 'CONFIRMED' WHERE order_no = ?", cancelledConfirmed).Error)

	got := s.anomalies(t)
	want := []httpapi.AnomalyResponse{
		{Kind: "paid_order_with_unconfirmed_reservation", OrderNo: paidReserved, Status: "PAID", ProductID: product(paidReserved), Reservation: "RESERVED"},
		{Kind: "paid_order_with_unconfirmed_reservation", OrderNo: paidReleased, Status: "PAID", ProductID: product(paidReleased), Reservation: "RELEASED"},
		{Kind: "cancelled_order_with_unreleased_reservation", OrderNo: cancelledReserved, Status: "CANCELLED", ProductID: product(cancelledReserved), Reservation: "RESERVED"},
		{Kind: "cancelled_order_with_unreleased_reservation", OrderNo: cancelledConfirmed, Status: "CANCELLED", ProductID: product(cancelledConfirmed), Reservation: "CONFIRMED"},
	}
	sortAnomalies(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("anomalies:\n got %+v\nwant %+v", got, want)
	}
	gauge := func(kind string) float64 { return findings(t, s)[kind] }
	if gauge("paid_order_with_unconfirmed_reservation") != 2 || gauge("cancelled_order_with_unreleased_reservation") != 2 || gauge("payment_succeeded_dead_lettered") != 0 {
		t.Fatalf("gauges %v %v, want 2 and 2", gauge("paid_order_with_unconfirmed_reservation"), gauge("cancelled_order_with_unreleased_reservation"))
	}
	testenv.Must(t, s.db.Exec("UPDATE stock_reservation SET status = 'CONFIRMED' WHERE order_no IN (?, ?)", paidReserved, paidReleased).Error)
	testenv.Must(t, s.db.Exec("UPDATE stock_reservation SET status = 'RELEASED' WHERE order_no IN (?, ?)", cancelledReserved, cancelledConfirmed).Error)
	if got := s.anomalies(t); len(got) != 0 || gauge("paid_order_with_unconfirmed_reservation") != 0 || gauge("cancelled_order_with_unreleased_reservation") != 0 {
		t.Fatalf("after the repair: %+v", got)
	}
}

// findings returns order_reconcile_findings by kind from the server's
// registry.
func findings(t *testing.T, s *server) map[string]float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	testenv.Must(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "order_reconcile_findings" {
			for _, m := range mf.GetMetric() {
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
