package e2e_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// payTimeout is ORDER_PAY_TIMEOUT in TestPurchaseFlow: the order-close job
// (every second there) closes an order left unpaid this long. Every other
// flow of that rig pays or cancels its orders well within it.
const payTimeout = "8s"

// TestPurchaseFlow runs order, coupon, payment and the platform simulator
// as processes, configured as `make run` configures them (its tokens, the
// simulator's normal mode) but for the jobs' timing and the simulator's
// faster retries, and drives four purchases through them at once (each its
// own user, product and coupon; a flow that needs another delivery files a
// simulator plan for its charge):
//
//   - storm: an order with a coupon paid through a storm of duplicate
//     notifications;
//   - cancel: the owner cancels an unpaid order;
//   - paid_after_close: the close job closes an unpaid order while the
//     customer's payment is in flight; the payment lands and is refunded;
//   - readme: the "Buy something" commands of docs/purchase-flow.md.
//
// Each counts its effects in the services' databases and on the streams.
// Then the three reconcilers must find nothing, and every process must stop
// on SIGTERM with status 0.
func TestPurchaseFlow(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigEnv{
		coupon:    true,
		order:     []string{"ORDER_PAY_TIMEOUT=" + payTimeout, "ORDER_CLOSE_SCHEDULE=@every 1s"},
		couponEnv: []string{"ORDER_PAY_TIMEOUT=" + payTimeout},
		payment:   []string{"PAYMENT_REFUND_SCHEDULE=@every 1s"},
	})
	t.Run("flows", func(t *testing.T) {
		t.Run("storm", func(t *testing.T) {
			t.Parallel()
			paidThroughStorm(t, r, 4242)
		})
		t.Run("cancel", func(t *testing.T) {
			t.Parallel()
			cancelUnpaid(t, r)
		})
		t.Run("paid_after_close", func(t *testing.T) {
			t.Parallel()
			paidAfterClose(t, r)
		})
		t.Run("readme", func(t *testing.T) {
			t.Parallel()
			readmeBuySomething(t, r)
		})
	})
	// Whatever the flows did, the payment service answered no notification
	// with an error, a conflict or a refusal.
	m := scrape(t, r.payment.URL("/metrics"))
	if bad := sumOf(m, "payment_callbacks_total") - sumOf(m, "payment_callbacks_total", `outcome="processed"`) -
		sumOf(m, "payment_callbacks_total", `outcome="duplicate"`) - sumOf(m, "payment_callbacks_total", `outcome="refunding"`); bad != 0 {
		t.Errorf("%v notifications answered other than processed, duplicate or refunding", bad)
	}
	r.finish(t)
}

// TestPlatformGoesQuiet runs order, payment and the simulator (no coupons)
// with the payment-query job asking about payments 3s old every second and
// the payment service's callback entry lock on:
//
//   - storm_entry_lock: a storm of notifications meets the entry lock,
//     whose refusals the platform retries;
//   - silent: the platform never notifies, and the query finds the
//     payment paid.
//
// They run one after the other, so that each one's counters are its own.
func TestPlatformGoesQuiet(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigEnv{
		callbackLock: true,
		payment: []string{"PAYMENT_CALLBACK_LOCK=true", "PAYMENT_QUERY_AFTER=3s", "PAYMENT_QUERY_SCHEDULE=@every 1s",
			"PAYMENT_QUERY_HORIZON=10m"},
	})
	t.Run("storm_entry_lock", func(t *testing.T) { paidThroughStorm(t, r, 8181) })
	t.Run("silent", func(t *testing.T) { foundByQuery(t, r) })
	r.finish(t)
}

// The storm: stormCopies concurrent copies of the paid notification, then
// lateRetries more one after another once it is acknowledged, and the
// first lostAnswers 2xx answers lost on the way back (so every run retries
// a notification the service has processed).
const (
	stormCopies = 50
	lateRetries = 10
	lostAnswers = 1
)

// paidThroughStorm: an operator creates a product at 15.00 with 10 units
// and (when the rig has coupons) issues userID a 5.00-off coupon; the user
// orders 2 with the coupon, POSTing twice with one Idempotency-Key, and
// pays (twice with one key); the platform sends a storm. The order ends
// PAID, the coupon USED, and every effect exists once: one order, one
// payment, one payment record, one of each event, one stock decrement and
// one reservation CONFIRMED, one coupon deduction.
func paidThroughStorm(t *testing.T, r *rig, userID uint64) {
	productID := r.newProduct(t, "storm", 1500, 10)
	var couponID uint64
	if r.coupon.Process != nil {
		couponID = r.newCoupon(t, userID, 500, 1000)
	}

	// 1. The order, twice with one Idempotency-Key: the second answer is
	// the first one replayed, and one order exists.
	h := as(userID, "Idempotency-Key", "e2e-order-"+testenv.RandomSuffix(12))
	body := map[string]any{"items": []map[string]any{{"product_id": productID, "quantity": 2}}}
	if couponID != 0 {
		body["coupon_id"] = couponID
	}
	var o, o2 order
	st, raw1 := call(t, "POST", r.order.URL("/orders"), h, body, &o)
	want(t, "place order", st, raw1, http.StatusCreated)
	st, raw2 := call(t, "POST", r.order.URL("/orders"), h, body, &o2)
	want(t, "place order again with the same key", st, raw2, http.StatusCreated)
	if !bytes.Equal(raw1, raw2) || o.OrderNo == "" {
		t.Fatalf("same Idempotency-Key, different answers:\n%s\n%s", raw1, raw2)
	}
	wantDiscount := int64(0)
	if couponID != 0 {
		wantDiscount = 500
	}
	if o.Status != "WAIT_PAY" || len(o.Items) != 1 || o.Items[0].UnitPrice != 1500 || o.Items[0].Quantity != 2 ||
		o.TotalAmount != 3000 || o.DiscountAmount != wantDiscount || o.PayAmount != 3000-wantDiscount {
		t.Fatalf("order %s, want 2 × 1500 from the catalog, %d off", raw1, wantDiscount)
	}
	if n := count(t, r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", userID); n != 1 {
		t.Fatalf("%d orders for the user after two POSTs with one key, want 1", n)
	}
	if got := r.available(t, productID); got != 8 {
		t.Fatalf("%d available after an order of 2 from 10, want 8", got)
	}
	if couponID != 0 {
		if c := r.getCoupon(t, userID, couponID); c.Status != "LOCKED" || c.LockedOrderNo != o.OrderNo {
			t.Fatalf("coupon after the order: %+v, want LOCKED by %s", c, o.OrderNo)
		}
	}

	// 2. The payment, into the storm.
	p := r.pay(t, userID, o.OrderNo, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: stormCopies, Replays: lateRetries, LostAnswers: lostAnswers})
	if p.Amount != o.PayAmount {
		t.Fatalf("payment of %d, want the order's pay_amount %d", p.Amount, o.PayAmount)
	}

	// 3. PAID, then USED.
	eventually(t, "payment PAID", func() (bool, string) {
		got := r.getPayment(t, userID, p.OutTradeNo)
		return got.Status == "PAID", got.Status
	})
	var final order
	eventually(t, "order PAID", func() (bool, string) {
		final = r.getOrder(t, userID, o.OrderNo)
		return final.Status == "PAID", final.Status
	})
	if final.PaymentNo != p.OutTradeNo {
		t.Fatalf("order paid by %q, want %q", final.PaymentNo, p.OutTradeNo)
	}
	if couponID != 0 {
		var c coupon
		eventually(t, "coupon USED", func() (bool, string) {
			c = r.getCoupon(t, userID, couponID)
			return c.Status == "USED", c.Status
		})
		if c.UsedOrderNo != o.OrderNo {
			t.Fatalf("coupon used by order %q, want %q", c.UsedOrderNo, o.OrderNo)
		}
	}
	// A paid order cannot be cancelled, and nobody else sees its order,
	// payment or coupon.
	st, raw := call(t, "POST", r.order.URL("/orders/"+o.OrderNo+"/cancel"), as(userID), nil, nil)
	want(t, "cancel a paid order", st, raw, http.StatusConflict)
	stranger := as(userID + 1)
	st, raw = call(t, "GET", r.order.URL("/orders/"+o.OrderNo), stranger, nil, nil)
	want(t, "another user's order", st, raw, http.StatusNotFound)
	st, raw = call(t, "GET", r.payment.URL("/payments/"+p.OutTradeNo), stranger, nil, nil)
	want(t, "another user's payment", st, raw, http.StatusNotFound)
	if couponID != 0 {
		st, raw = call(t, "GET", r.coupon.URL(fmt.Sprintf("/coupons/%d", couponID)), stranger, nil, nil)
		want(t, "another user's coupon", st, raw, http.StatusNotFound)
	}

	// 4. The simulator delivers every copy, retry and late retry; its record
	// must show the storm as planned, the lost answer retried, and every
	// copy acknowledged in the end.
	var ch pspsim.Charge
	eventually(t, "simulator done delivering", func() (bool, string) {
		ch = r.charge(t, p.OutTradeNo)
		return ch.Done, fmt.Sprintf("%d attempts", len(ch.Attempts))
	})
	tally := ch.Tally()
	t.Logf("simulator: %+v", tally)
	if !ch.Acknowledged || tally.Copies != stormCopies+lateRetries || tally.Lost != lostAnswers ||
		tally.AcknowledgedCopies != stormCopies+lateRetries {
		t.Fatalf("simulator: acknowledged=%v, %+v: want %d copies (%d concurrent + %d late), %d lost answer, every copy acknowledged",
			ch.Acknowledged, tally, stormCopies+lateRetries, stormCopies, lateRetries, lostAnswers)
	}
	for _, a := range ch.Attempts {
		if !a.AnswerLost {
			continue
		}
		// A lost answer is one the service gave: a 2xx, so it had processed
		// the notification; the copy was retried.
		retried := false
		for _, b := range ch.Attempts {
			retried = retried || (b.Copy == a.Copy && b.Try == a.Try+1)
		}
		if a.Status/100 != 2 || !retried {
			t.Fatalf("simulator: lost answer %+v: want the service's 2xx, retried", a)
		}
	}
	if !r.callbackLock && tally.Refused != 0 {
		t.Errorf("%d copies refused without the entry lock, want 0", tally.Refused)
	}

	// 5. Exactly one of every effect.
	checks := []check{
		{"payments for the order", r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ?", []any{o.OrderNo}, 1},
		{"payment records", r.payment.db, "SELECT COUNT(*) FROM payment_transaction WHERE out_trade_no = ?", []any{p.OutTradeNo}, 1},
		{"refunds", r.payment.db, "SELECT COUNT(*) FROM refund WHERE order_no = ?", []any{o.OrderNo}, 0},
		outbox(r.payment, events.PaymentSucceeded, o.OrderNo, 1),
		{"paid orders", r.order.db, "SELECT COUNT(*) FROM orders WHERE order_no = ? AND status = 'PAID'", []any{o.OrderNo}, 1},
		outbox(r.order, events.OrderPaid, o.OrderNo, 1),
		{"reservations CONFIRMED", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'CONFIRMED'", []any{o.OrderNo}, 1},
		{"reservations", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ?", []any{o.OrderNo}, 1},
		{"units available", r.order.db, "SELECT available FROM product_stock WHERE product_id = ?", []any{productID}, 8},
	}
	if couponID != 0 {
		checks = append(checks,
			check{"coupon deductions of the order", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE order_no = ?", []any{o.OrderNo}, 1},
			check{"coupon deductions of the coupon", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE coupon_id = ?", []any{couponID}, 1},
			check{"coupon messages, SUCCESS", r.coupon.db, "SELECT COUNT(*) FROM coupon_message WHERE order_no = ? AND status = 'SUCCESS'", []any{o.OrderNo}, 1},
			check{"coupon messages", r.coupon.db, "SELECT COUNT(*) FROM coupon_message WHERE order_no = ?", []any{o.OrderNo}, 1},
		)
	}
	counts(t, checks...)
	r.publishedOnce(t, events.PaymentSucceeded, o.OrderNo)
	r.publishedOnce(t, events.OrderPaid, o.OrderNo)

	if !r.callbackLock {
		return
	}
	// 6. With the entry lock (and no other notification in this rig), the
	// payment service's own count: one notification processed, every other
	// 2xx it gave (lost answers and late retries included) a duplicate,
	// every refusal the simulator saw the entry lock's, and nothing else.
	m := scrape(t, r.payment.URL("/metrics"))
	answered2xx := tally.Answered - tally.Refused
	if got := m[`payment_callbacks_total{handler="fixed",outcome="processed"}`]; got != 1 {
		t.Errorf("callbacks processed: %v, want 1", got)
	}
	if got := m[`payment_callbacks_total{handler="fixed",outcome="duplicate"}`]; got != float64(answered2xx-1) {
		t.Errorf("callbacks answered as duplicates: %v, want %d", got, answered2xx-1)
	}
	if got := m[`payment_callbacks_total{handler="fixed",outcome="locked"}`]; got != float64(tally.Refused) {
		t.Errorf("callbacks refused by the entry lock: %v, want the simulator's %d refused answers", got, tally.Refused)
	}
	if got := sumOf(m, "payment_callbacks_total"); got != float64(tally.Answered) {
		t.Errorf("payment_callbacks_total sums to %v, want the %d answers the simulator recorded", got, tally.Answered)
	}
}

// cancelUnpaid: the owner cancels an unpaid order with a coupon. A stranger
// can neither see nor cancel it (404, as for an order that does not
// exist); the owner's cancel makes it CANCELLED, gives the 3 units back
// once and releases the coupon, and a second cancel answers the cancelled
// order. The coupon then takes another order.
func cancelUnpaid(t *testing.T, r *rig) {
	const owner, stranger = 5151, 5152
	productID := r.newProduct(t, "cancel", 1200, 5)
	couponID := r.newCoupon(t, owner, 300, 1000)
	o := r.placeOrder(t, owner, productID, 3, couponID)
	if o.TotalAmount != 3600 || o.DiscountAmount != 300 || o.PayAmount != 3300 {
		t.Fatalf("order %+v, want 3600 - 300 = 3300", o)
	}
	if got := r.available(t, productID); got != 2 {
		t.Fatalf("%d available after an order of 3 from 5, want 2", got)
	}
	if c := r.getCoupon(t, owner, couponID); c.Status != "LOCKED" || c.LockedOrderNo != o.OrderNo {
		t.Fatalf("coupon after the order: %+v, want LOCKED by %s", c, o.OrderNo)
	}

	// A stranger.
	st, raw := call(t, "POST", r.order.URL("/orders/"+o.OrderNo+"/cancel"), as(stranger), nil, nil)
	want(t, "cancel by another user", st, raw, http.StatusNotFound)
	st, raw = call(t, "GET", r.order.URL("/orders/"+o.OrderNo), as(stranger), nil, nil)
	want(t, "get by another user", st, raw, http.StatusNotFound)
	if got := r.getOrder(t, owner, o.OrderNo); got.Status != "WAIT_PAY" {
		t.Fatalf("order after a stranger's cancel: %s, want WAIT_PAY", got.Status)
	}

	// The owner, twice.
	var c1, c2 order
	st, raw = call(t, "POST", r.order.URL("/orders/"+o.OrderNo+"/cancel"), as(owner), nil, &c1)
	want(t, "cancel", st, raw, http.StatusOK)
	if c1.Status != "CANCELLED" || c1.CancelReason != "customer" || c1.CancelledAt == nil {
		t.Fatalf("cancelled order %s, want CANCELLED by the customer", raw)
	}
	st, raw = call(t, "POST", r.order.URL("/orders/"+o.OrderNo+"/cancel"), as(owner), nil, &c2)
	want(t, "cancel again", st, raw, http.StatusOK)
	if c2.Status != "CANCELLED" || c2.CancelledAt == nil || *c2.CancelledAt != *c1.CancelledAt {
		t.Fatalf("second cancel answered %s, want the cancelled order as it was", raw)
	}
	if got := r.available(t, productID); got != 5 {
		t.Fatalf("%d available after the cancel, want the 5 of before the order", got)
	}
	eventually(t, "coupon released", func() (bool, string) {
		c := r.getCoupon(t, owner, couponID)
		return c.Status == "UNUSED" && c.LockedOrderNo == "", fmt.Sprintf("%+v", c)
	})
	// A closed order cannot be paid.
	r.payMu.Lock()
	st, raw = call(t, "POST", r.payment.URL("/payments"), as(owner, "Idempotency-Key", "e2e-pay-"+testenv.RandomSuffix(12)), map[string]any{"order_no": o.OrderNo}, nil)
	r.payMu.Unlock()
	want(t, "pay a cancelled order", st, raw, http.StatusConflict)

	counts(t,
		check{"reservations RELEASED", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'RELEASED'", []any{o.OrderNo}, 1},
		check{"reservations", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ?", []any{o.OrderNo}, 1},
		check{"units available", r.order.db, "SELECT available FROM product_stock WHERE product_id = ?", []any{productID}, 5},
		outbox(r.order, events.OrderCancelled, o.OrderNo, 1),
		outbox(r.order, events.OrderPaid, o.OrderNo, 0),
		check{"payments of the order (the close's CLOSED placeholder)", r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ? AND status = 'CLOSED'", []any{o.OrderNo}, 1},
		check{"payments of the order", r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ?", []any{o.OrderNo}, 1},
		check{"coupon deductions", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE coupon_id = ?", []any{couponID}, 0},
	)
	r.publishedOnce(t, events.OrderCancelled, o.OrderNo)
	eventually(t, "the payment service records the cancellation", func() (bool, string) {
		n := count(t, r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ? AND order_cancelled_at IS NOT NULL AND cancel_reason = 'customer'", o.OrderNo)
		return n == 1, fmt.Sprintf("%d payments with the cancellation recorded", n)
	})

	// The coupon is usable again: another order takes it, and gives it back.
	again := r.placeOrder(t, owner, productID, 1, couponID)
	if again.DiscountAmount != 300 {
		t.Fatalf("second order with the released coupon: %+v, want 300 off", again)
	}
	if c := r.getCoupon(t, owner, couponID); c.Status != "LOCKED" || c.LockedOrderNo != again.OrderNo {
		t.Fatalf("coupon after the second order: %+v, want LOCKED by %s", c, again.OrderNo)
	}
	st, raw = call(t, "POST", r.order.URL("/orders/"+again.OrderNo+"/cancel"), as(owner), nil, nil)
	want(t, "cancel the second order", st, raw, http.StatusOK)
	eventually(t, "coupon released again", func() (bool, string) {
		c := r.getCoupon(t, owner, couponID)
		return c.Status == "UNUSED", fmt.Sprintf("%+v", c)
	})
	if got := r.available(t, productID); got != 5 {
		t.Fatalf("%d available after both cancels, want 5", got)
	}
}

// paidAfterClose is incident 6 across the processes: the customer pays,
// and the platform holds the notification (close_race: a close meanwhile
// answers closed, as a real platform can while the payment completes). The
// close job closes the order at ORDER_PAY_TIMEOUT; then the notification
// arrives, five copies of it. The order stays CANCELLED, its stock and
// coupon released once; the payment is recorded once and given back once:
// REFUNDING, one refund at the platform, REFUNDED.
func paidAfterClose(t *testing.T, r *rig) {
	const userID = 6161
	productID := r.newProduct(t, "late", 2000, 4)
	couponID := r.newCoupon(t, userID, 500, 1000)
	o := r.placeOrder(t, userID, productID, 1, couponID)
	p := r.pay(t, userID, o.OrderNo, &pspsim.Plan{Mode: pspsim.ModeCloseRace, Copies: 5})
	if p.Amount != 1500 {
		t.Fatalf("payment of %d, want 2000 - 500", p.Amount)
	}
	if ch := r.charge(t, p.OutTradeNo); !ch.Held || ch.Status != "PAID" {
		t.Fatalf("platform: held=%v status=%s, want a paid charge whose notification is held", ch.Held, ch.Status)
	}

	// The close job.
	var closed order
	eventually(t, "order closed by the close job", func() (bool, string) {
		closed = r.getOrder(t, userID, o.OrderNo)
		return closed.Status != "WAIT_PAY", closed.Status
	})
	if closed.Status != "CANCELLED" || closed.CancelReason != "timeout" {
		t.Fatalf("order after ORDER_PAY_TIMEOUT: %+v, want CANCELLED for timeout", closed)
	}
	if got := r.getPayment(t, userID, p.OutTradeNo); got.Status != "CLOSED" {
		t.Fatalf("payment after the close: %s, want CLOSED", got.Status)
	}
	if got := r.available(t, productID); got != 4 {
		t.Fatalf("%d available after the close, want 4", got)
	}
	eventually(t, "coupon released", func() (bool, string) {
		c := r.getCoupon(t, userID, couponID)
		return c.Status == "UNUSED", fmt.Sprintf("%+v", c)
	})

	// The held notification lands.
	st, raw := call(t, "POST", r.psp.URL("/sim/charges/"+p.OutTradeNo+"/deliver"), pspAdmin, nil, nil)
	want(t, "deliver the held notification", st, raw, http.StatusAccepted)
	eventually(t, "payment REFUNDED", func() (bool, string) {
		got := r.getPayment(t, userID, p.OutTradeNo)
		return got.Status == "REFUNDED", got.Status
	})
	var refund pspsim.Refund
	eventually(t, "refund notification delivered", func() (bool, string) {
		st, raw := call(t, "GET", r.psp.URL("/refunds/R"+p.OutTradeNo), nil, nil, &refund)
		return st == http.StatusOK && refund.Done && refund.Acknowledged, fmt.Sprintf("%d %.200s", st, raw)
	})
	ch := r.charge(t, p.OutTradeNo)
	if ch.Refunded != p.Amount || refund.Notification.Amount != p.Amount {
		t.Fatalf("platform: %d refunded of the charge, refund of %d; want one refund of %d", ch.Refunded, refund.Notification.Amount, p.Amount)
	}
	if !ch.Done || ch.Tally().AcknowledgedCopies != 5 {
		t.Fatalf("platform: the late notification's copies %+v, want 5 acknowledged", ch.Tally())
	}
	if got := r.getOrder(t, userID, o.OrderNo); got.Status != "CANCELLED" || got.PaymentNo != "" {
		t.Fatalf("order after the late payment: %+v, want CANCELLED, unpaid", got)
	}
	r.payMu.Lock()
	st, raw = call(t, "POST", r.payment.URL("/payments"), as(userID, "Idempotency-Key", "e2e-pay-"+testenv.RandomSuffix(12)), map[string]any{"order_no": o.OrderNo}, nil)
	r.payMu.Unlock()
	want(t, "pay the closed order again", st, raw, http.StatusConflict)

	counts(t,
		check{"payment records", r.payment.db, "SELECT COUNT(*) FROM payment_transaction WHERE out_trade_no = ?", []any{p.OutTradeNo}, 1},
		check{"refunds REFUNDED", r.payment.db, "SELECT COUNT(*) FROM refund WHERE out_trade_no = ? AND status = 'REFUNDED'", []any{p.OutTradeNo}, 1},
		check{"refunds", r.payment.db, "SELECT COUNT(*) FROM refund WHERE order_no = ?", []any{o.OrderNo}, 1},
		outbox(r.payment, events.PaymentSucceeded, o.OrderNo, 0),
		outbox(r.payment, events.PaymentRefunded, o.OrderNo, 1),
		outbox(r.order, events.OrderCancelled, o.OrderNo, 1),
		outbox(r.order, events.OrderPaid, o.OrderNo, 0),
		check{"reservations RELEASED", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'RELEASED'", []any{o.OrderNo}, 1},
		check{"reservations", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ?", []any{o.OrderNo}, 1},
		check{"units available", r.order.db, "SELECT available FROM product_stock WHERE product_id = ?", []any{productID}, 4},
		check{"coupon deductions", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE coupon_id = ?", []any{couponID}, 0},
		check{"coupon messages", r.coupon.db, "SELECT COUNT(*) FROM coupon_message WHERE order_no = ?", []any{o.OrderNo}, 0},
	)
	r.publishedOnce(t, events.OrderCancelled, o.OrderNo)
	r.publishedOnce(t, events.PaymentRefunded, o.OrderNo)
	if n := r.published(t, events.PaymentSucceeded)[o.OrderNo]; n != 0 {
		t.Errorf("%d payment.succeeded messages about the closed order, want 0", n)
	}
	if c := r.getCoupon(t, userID, couponID); c.Status != "UNUSED" {
		t.Errorf("coupon at the end: %+v, want UNUSED", c)
	}
}

// foundByQuery: the platform takes the payment and never says so. The
// payment-query job asks about it once it is PAYMENT_QUERY_AFTER old, and
// the answer pays it through the notification's code: PAID, one record,
// one payment.succeeded, the order PAID and its stock confirmed.
func foundByQuery(t *testing.T, r *rig) {
	const userID = 7171
	productID := r.newProduct(t, "quiet", 900, 3)
	o := r.placeOrder(t, userID, productID, 1, 0)
	before := scrape(t, r.payment.URL("/metrics"))
	p := r.pay(t, userID, o.OrderNo, &pspsim.Plan{Mode: pspsim.ModeSilent})
	if got := r.getPayment(t, userID, p.OutTradeNo); got.Status != "WAIT_PAY" {
		t.Fatalf("payment at once: %s, want WAIT_PAY until the query", got.Status)
	}
	eventually(t, "payment PAID", func() (bool, string) {
		got := r.getPayment(t, userID, p.OutTradeNo)
		return got.Status == "PAID", got.Status
	})
	eventually(t, "order PAID", func() (bool, string) {
		got := r.getOrder(t, userID, o.OrderNo)
		return got.Status == "PAID" && got.PaymentNo == p.OutTradeNo, fmt.Sprintf("%+v", got)
	})
	if ch := r.charge(t, p.OutTradeNo); len(ch.Attempts) != 0 || ch.Status != "PAID" {
		t.Fatalf("platform: %d notification attempts, status %s; want a paid charge never notified", len(ch.Attempts), ch.Status)
	}
	after := scrape(t, r.payment.URL("/metrics"))
	if got := after[`payment_queries_total{answer="paid"}`] - before[`payment_queries_total{answer="paid"}`]; got != 1 {
		t.Errorf("queries answered paid: %v, want 1", got)
	}
	if got := sumOf(after, "payment_closes_total") - sumOf(before, "payment_closes_total"); got != 0 {
		t.Errorf("%v closes asked: the order's close, not the query, found the payment", got)
	}
	if got := sumOf(after, "payment_callbacks_total") - sumOf(before, "payment_callbacks_total"); got != 0 {
		t.Errorf("%v notifications answered from a silent platform", got)
	}
	counts(t,
		check{"payment records", r.payment.db, "SELECT COUNT(*) FROM payment_transaction WHERE out_trade_no = ?", []any{p.OutTradeNo}, 1},
		outbox(r.payment, events.PaymentSucceeded, o.OrderNo, 1),
		outbox(r.order, events.OrderPaid, o.OrderNo, 1),
		check{"reservations CONFIRMED", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'CONFIRMED'", []any{o.OrderNo}, 1},
		check{"units available", r.order.db, "SELECT available FROM product_stock WHERE product_id = ?", []any{productID}, 2},
	)
	r.publishedOnce(t, events.PaymentSucceeded, o.OrderNo)
	r.publishedOnce(t, events.OrderPaid, o.OrderNo)
	if !strings.Contains(r.payment.Stdout(), `"msg":"payment found paid by a query"`) {
		t.Errorf("payment service: no \"payment found paid by a query\" log line")
	}
}
