package lab

// Incident 6, paid after close: a customer pays at the last second of the
// order's payment window while the order-close job closes it. The order
// service (services/order/lab's OrderAPI, with ORDER_CLOSE_MODE set to the
// variant), the payment service (services/payment/lab's Start) and the
// platform simulator run in process and talk over real HTTP; each on its
// own throwaway database. The customer's payment is paid at the platform
// and its notification held in flight (a simulator plan); the close job
// runs; then the notification is delivered, the payment service's events
// are handed to the order service's consumer, and the refund job runs. The
// scenario counts, in the three places that hold them, what is left: the
// order and its stock, the payment and its refunds, and the platform's
// refunds.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/variant"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

const incident6Title = "paid after close"

// VariantFixedPaidFirst is incident 6's fix when the platform answers the
// close with "paid": the order is not closed, and it is paid.
const VariantFixedPaidFirst = "fixed-paid-first"

// The purchase of incident 6: two units of a product priced 4,999 cents,
// with a coupon of 500 off, from a stock of ten.
const (
	closeStock    = 10
	closeQuantity = 2
	closePrice    = 4999
	closeUser     = 6001
	closeCouponID = 61
	closeDiscount = 500
)

// CloseScenarios lists incident 6. In broken and fixed the platform's close
// answers "closed" although the customer has paid (the race inside a real
// platform, pspsim.ModeCloseRace): the broken close never asks, so the
// late payment is kept on a cancelled order; the fix closes the order and
// refunds the payment once. In fixed-paid-first the platform answers
// "paid" (pspsim.ModeHold): the fix keeps the order open and it is paid.
func CloseScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 6, Variant: lab.Broken, WantHolds: false, Run: paidAfterCloseScenario(lab.Broken, "i6b", variant.Broken, pspsim.ModeCloseRace, "CANCELLED")},
		{Incident: 6, Variant: lab.Fixed, WantHolds: true, WantCount: 1, Run: paidAfterCloseScenario(lab.Fixed, "i6f", variant.Fixed, pspsim.ModeCloseRace, "CANCELLED")},
		{Incident: 6, Variant: VariantFixedPaidFirst, WantHolds: true, Run: paidAfterCloseScenario(VariantFixedPaidFirst, "i6p", variant.Fixed, pspsim.ModeHold, "PAID")},
	}
}

// LateCharge is what one run of incident 6 left behind, read from the
// order database, the payment database and the platform.
type LateCharge struct {
	// OrderStatus is the order's status; Released and Confirmed count its
	// stock reservations in each state; Available is the product's stock
	// afterwards (closeStock before the order).
	OrderStatus         string
	Released, Confirmed int
	Available           int
	// Cancelled and Paid count the order.cancelled (which the coupon
	// service consumes to release the coupon) and order.paid events.
	Cancelled, Paid int
	// PaymentStatus is the payment's status; Refunds its refund rows and
	// RefundStatus the status of the first.
	PaymentStatus string
	Refunds       int
	RefundStatus  string
	// ChargePaid says the platform took the customer's money; Refunded is
	// what it gave back, PlatformRefunds the refunds it made (a refund
	// number it knows), RefundRequests the requests that named them.
	ChargePaid                      bool
	Amount, Refunded                int64
	PlatformRefunds, RefundRequests int
	// Closed, ClosePaid come from the close job's pass: orders it cancelled
	// and orders it found paid. Refused counts the payment.succeeded events
	// the order service refused for good (it would dead-letter them).
	Closed, ClosePaid, Refused int
	// Findings is what the payment service's reconciler reports as
	// paid_cancelled_without_refund once every event has been handled: the
	// audit that tells someone to give the money back by hand.
	Findings int
}

// Holds reports incident 6's invariant: the order ends closed or paid,
// never waiting; a cancelled order whose charge was paid has exactly one
// refund of the whole amount at the platform, settled at the payment
// service, its stock all released and one order.cancelled; a paid order
// has no refund, its stock confirmed and one order.paid; and the payment
// service's reconciler finds nothing to give back by hand.
func (c LateCharge) Holds() bool {
	sold := closeStock - closeQuantity
	if c.Findings != 0 {
		return false
	}
	switch c.OrderStatus {
	case "CANCELLED":
		money := !c.ChargePaid || (c.PlatformRefunds == 1 && c.RefundRequests == 1 && c.Refunded == c.Amount &&
			c.Refunds == 1 && c.RefundStatus == "REFUNDED" && c.PaymentStatus == "REFUNDED")
		return money && c.Released == 1 && c.Confirmed == 0 && c.Available == closeStock && c.Cancelled == 1 && c.Paid == 0
	case "PAID":
		return c.ChargePaid && c.PaymentStatus == "PAID" && c.Refunds == 0 && c.PlatformRefunds == 0 &&
			c.Confirmed == 1 && c.Released == 0 && c.Available == sold && c.Paid == 1 && c.Cancelled == 0
	}
	return false
}

// String sums c up for the lab's table.
func (c LateCharge) String() string {
	refunds := fmt.Sprintf("%d refunds", c.Refunds)
	if c.Refunds > 0 {
		refunds += " " + c.RefundStatus
	}
	return fmt.Sprintf("order %s, stock %d/%d back, %d order.cancelled, %d order.paid; payment %s, %s; platform refunded %d/%d; order refused %d payment.succeeded; reconciler: %d paid_cancelled_without_refund",
		c.OrderStatus, c.Available-(closeStock-closeQuantity), closeQuantity, c.Cancelled, c.Paid,
		c.PaymentStatus, refunds, c.Refunded, c.Amount, c.Refused, c.Findings)
}

// paidAfterCloseScenario runs the story with the order service's close
// mode and the platform's plan for the customer's charge. The order must
// end in wantStatus: CANCELLED when the platform answers the close with
// "closed", PAID when it answers "paid" (the customer paid first, and keeps
// the order).
func paidAfterCloseScenario(name, suffix string, mode variant.Mode, plan, wantStatus string) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		res := lab.Result{
			Incident: 6,
			Title:    incident6Title,
			Variant:  name,
			Injected: fmt.Sprintf("customer pays as the close job runs, notification held past the close (plan %s, ORDER_CLOSE_MODE=%s)", plan, mode),
			Effect:   "refunds at the platform",
			Expected: "= 1, order CANCELLED",
		}
		if wantStatus == "PAID" {
			res.Expected = "= 0, order PAID"
		}
		rig, err := StartPurchaseRig(ctx, env, suffix, mode)
		if err != nil {
			return res, err
		}
		defer rig.Close()
		env.Note("incident 6 %s: the customer pays as the close job runs (plan %s)", name, plan)
		c, err := rig.PayWhileClosing(ctx, plan, env.Timeline)
		if err != nil {
			return res, err
		}
		res.Count = c.PlatformRefunds
		res.Effect = "refunds at the platform (" + c.String() + ")"
		res.Holds = c.Holds() && c.OrderStatus == wantStatus
		return res, nil
	}
}

// PurchaseRig is the order service, the payment service and the platform
// simulator wired to one another in process, each order service call to
// the payment service and back over real HTTP.
type PurchaseRig struct {
	Orders   *orderlab.OrderAPI
	Payments *paymentlab.Service
	Sim      *pspsim.Simulator
	close    []func()
}

// StartPurchaseRig starts the three with the order service's close mode;
// Close stops them and drops their databases.
func StartPurchaseRig(ctx context.Context, env lab.Env, suffix string, mode variant.Mode) (_ *PurchaseRig, err error) {
	r := &PurchaseRig{}
	// One order and one payment at a time: a few connections each leave
	// the shared database server room for everything else.
	env.MySQL.MaxOpenConns, env.MySQL.MaxIdleConns = 4, 2
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	sim, simURL, stopSim, err := paymentlab.StartSimulator(env)
	if err != nil {
		return nil, err
	}
	r.Sim = sim
	r.close = append(r.close, stopSim)

	// The two services need each other's address before either exists:
	// the payment service reaches the order service through this
	// forwarder, pointed at it once it is up.
	var orderHandler atomic.Pointer[http.Handler]
	fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := orderHandler.Load()
		if h == nil {
			http.Error(w, "order service not started", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, req)
	}))
	r.close = append(r.close, fwd.Close)

	// The customer signs in once for both services: one issuer of the
	// development key, whose tokens the order lab's Authorization mints.
	issuer, err := auth.StartDevIssuer()
	if err != nil {
		return nil, err
	}
	r.close = append(r.close, func() { _ = issuer.Close() })
	signIn := map[string]string{"AUTH_ISSUER": issuer.URL, "AUTH_AUDIENCE": orderlab.Audience}

	r.Payments, err = paymentlab.Start(ctx, env, suffix+"_pay", map[string]string{"ORDER_URL": fwd.URL, "PSP_URL": simURL,
		"AUTH_ISSUER": issuer.URL, "AUTH_AUDIENCE": orderlab.Audience})
	if err != nil {
		return nil, err
	}
	r.close = append(r.close, r.Payments.Close)

	r.Orders, err = orderlab.StartOrderAPI(ctx, env, suffix+"_ord", orderlab.OrderAPIConfig{Guard: variant.Fixed, Close: mode, PaymentURL: r.Payments.URL, Clients: 4, Vars: signIn})
	if err != nil {
		return nil, err
	}
	r.close = append(r.close, r.Orders.Close)
	orderHandler.Store(&r.Orders.Handler)
	return r, nil
}

// Close stops everything and drops the databases.
func (r *PurchaseRig) Close() {
	for i := len(r.close) - 1; i >= 0; i-- {
		r.close[i]()
	}
	r.close = nil
}

// PayWhileClosing plays incident 6 once: an order with a coupon, its
// payment charged at the platform with plan (the notification held), the
// order's payment window over and the close job's pass, its order.cancelled
// handed to the payment service, the notification delivered, the payment
// service's payment.succeeded events handed to the order service, the
// refund job, and every notification settled; then it runs the payment
// service's reconciler and counts.
//
// tl, when not nil, gets what each actor did, for the lab report.
func (r *PurchaseRig) PayWhileClosing(ctx context.Context, plan string, tl *lab.Timeline) (LateCharge, error) {
	var c LateCharge
	start := time.Now()
	product, err := r.Orders.CreateProduct(ctx, "late-pay", closePrice, closeStock)
	if err != nil {
		return c, err
	}
	r.Orders.AddCoupon(closeCouponID, closeUser, closeDiscount, 1000)
	body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":%d}],"coupon_id":%d}`, product, closeQuantity, closeCouponID)
	reply, err := r.Orders.PostOrder(ctx, fmt.Sprint(closeUser), "late-pay-order", body)
	if err != nil {
		return c, err
	}
	if reply.Status != http.StatusCreated {
		return c, fmt.Errorf("POST /orders: %d %s", reply.Status, reply.Body)
	}
	var placed struct {
		OrderNo string `json:"order_no"`
	}
	if err := json.Unmarshal(reply.Body, &placed); err != nil {
		return c, err
	}
	tl.Span("customer", lab.KindStep, "order placed, stock reserved", start)

	// The customer pays: the platform takes the money at once and its
	// notification stays in flight.
	if err := r.Sim.SetNextPlan(pspsim.Plan{Mode: plan}); err != nil {
		return c, err
	}
	step := time.Now()
	outTradeNo, err := r.pay(ctx, placed.OrderNo)
	if err != nil {
		return c, err
	}
	tl.Span("customer", lab.KindStep, "pays; the platform takes the money", step)
	tl.Point("platform", lab.KindFault, "notification held")

	// Meanwhile the payment window ends (the order is made 16 minutes old,
	// past ORDER_PAY_TIMEOUT) and the close job passes.
	if err := r.Orders.DB.WithContext(ctx).Exec("UPDATE orders SET created_at = created_at - INTERVAL 16 MINUTE WHERE order_no = ?", placed.OrderNo).Error; err != nil {
		return c, err
	}
	step = time.Now()
	c.Closed, c.ClosePaid, err = r.Orders.CloseExpired(ctx)
	if err != nil {
		return c, err
	}
	switch {
	case c.ClosePaid > 0:
		tl.Span("close job", lab.KindAbsorbed, "platform says paid: order kept, payment applied", step)
	case c.Closed > 0:
		tl.Span("close job", lab.KindStep, "order CANCELLED, stock released", step)
	}
	if err := r.handOverCancellations(ctx); err != nil {
		return c, err
	}

	// The notification arrives; the events the payment service wrote reach
	// the order service; the refund job runs; the platform's refund
	// notifications arrive.
	step = time.Now()
	if err := r.Sim.Deliver(outTradeNo); err != nil {
		return c, err
	}
	if err := r.Sim.Wait(ctx); err != nil {
		return c, err
	}
	tl.Span("platform", lab.KindStep, "late notification delivered", step)
	step = time.Now()
	if c.Refused, err = r.handOverPayments(ctx); err != nil {
		return c, err
	}
	if c.Refused > 0 {
		tl.Span("order service", lab.KindRefused, "payment.succeeded refused: order is CANCELLED", step)
	}
	step = time.Now()
	if _, err := r.Payments.App.SendRefunds(ctx); err != nil {
		return c, err
	}
	if err := r.Sim.Wait(ctx); err != nil {
		return c, err
	}
	findings, err := r.Payments.Findings(ctx)
	if err != nil {
		return c, err
	}
	c.Findings = findings["paid_cancelled_without_refund"]
	if err := r.count(ctx, &c, placed.OrderNo, product, outTradeNo); err != nil {
		return c, err
	}
	switch {
	case c.PlatformRefunds > 0:
		tl.Span("refund job", lab.KindEffect, fmt.Sprintf("%d refund of %d at the platform", c.PlatformRefunds, c.Refunded), step)
	case c.Findings > 0:
		tl.Point("payment service", lab.KindDuplicate, "money kept on a CANCELLED order: no refund")
	}
	tl.Point("order", lab.KindStep, "ends "+c.OrderStatus)
	return c, nil
}

// pay is the customer's POST /payments for orderNo; it returns the
// payment's out_trade_no.
func (r *PurchaseRig) pay(ctx context.Context, orderNo string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Payments.URL+"/payments", strings.NewReader(fmt.Sprintf(`{"order_no":%q}`, orderNo)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	authz, err := r.Orders.Authorization(closeUser)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Idempotency-Key", "late-pay-"+orderNo)
	resp, err := r.Orders.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /payments: %d %s", resp.StatusCode, b)
	}
	var p struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	return p.OutTradeNo, json.Unmarshal(b, &p)
}

// handOverCancellations gives every order.cancelled in the order service's
// outbox to the payment service's consumer, which records the cancellation
// on the order's payment for its reconciler (see handOverPayments).
func (r *PurchaseRig) handOverCancellations(ctx context.Context) error {
	msgs, err := pending(ctx, r.Orders.DB, events.OrderCancelled)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := r.Payments.HandOrderCancelled(ctx, m); err != nil {
			return fmt.Errorf("payment service on %s: %w", m.ID, err)
		}
	}
	return nil
}

// pending reads the outbox rows of topic in db as the messages a consumer
// would receive, oldest first.
func pending(ctx context.Context, db *gorm.DB, topic string) ([]inbox.Message, error) {
	var rows []struct {
		MessageNo string
		Body      []byte
	}
	if err := db.WithContext(ctx).Raw("SELECT message_no, body FROM local_message WHERE topic = ? ORDER BY id", topic).Scan(&rows).Error; err != nil {
		return nil, err
	}
	msgs := make([]inbox.Message, len(rows))
	for i, row := range rows {
		msgs[i] = inbox.Message{ID: row.MessageNo, Subject: topic, Body: row.Body, Delivered: 1}
	}
	return msgs, nil
}

// handOverPayments gives every payment.succeeded in the payment service's
// outbox to the order service's consumer, as the relay and JetStream would
// (each in a transaction of its own, the one the inbox would open), and
// returns how many the consumer refused for good. The lab runs no relay:
// delivery through NATS is incidents 1 and 2's subject, and this keeps the
// order of events fixed.
func (r *PurchaseRig) handOverPayments(ctx context.Context) (int, error) {
	msgs, err := pending(ctx, r.Payments.DB, events.PaymentSucceeded)
	if err != nil {
		return 0, err
	}
	refused := 0
	for _, m := range msgs {
		err := r.Orders.HandPaymentSucceeded(ctx, m)
		switch {
		case inbox.IsPermanent(err):
			refused++
		case err != nil:
			return refused, fmt.Errorf("order service on %s: %w", m.ID, err)
		}
	}
	return refused, nil
}

// count reads what the run left in the order database, the payment
// database and the platform.
func (r *PurchaseRig) count(ctx context.Context, c *LateCharge, orderNo string, product uint64, outTradeNo string) error {
	odb, pdb := r.Orders.DB.WithContext(ctx), r.Payments.DB.WithContext(ctx)
	eventsOf := func(topic string, n *int) error {
		return odb.Raw("SELECT COUNT(*) FROM local_message WHERE topic = ? AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(body USING utf8mb4), '$.order_no')) = ?", topic, orderNo).Scan(n).Error
	}
	var refundNos []string
	err := errors.Join(
		odb.Raw("SELECT status FROM orders WHERE order_no = ?", orderNo).Scan(&c.OrderStatus).Error,
		odb.Raw("SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'RELEASED'", orderNo).Scan(&c.Released).Error,
		odb.Raw("SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'CONFIRMED'", orderNo).Scan(&c.Confirmed).Error,
		odb.Raw("SELECT available FROM product_stock WHERE product_id = ?", product).Scan(&c.Available).Error,
		eventsOf(events.OrderCancelled, &c.Cancelled),
		eventsOf(events.OrderPaid, &c.Paid),
		pdb.Raw("SELECT status FROM payments WHERE out_trade_no = ?", outTradeNo).Scan(&c.PaymentStatus).Error,
		pdb.Raw("SELECT refund_no FROM refund WHERE out_trade_no = ? ORDER BY id", outTradeNo).Scan(&refundNos).Error,
		pdb.Raw("SELECT COALESCE(MIN(status), '') FROM refund WHERE out_trade_no = ?", outTradeNo).Scan(&c.RefundStatus).Error,
	)
	if err != nil {
		return fmt.Errorf("count incident 6: %w", err)
	}
	c.Refunds = len(refundNos)
	trade, ok := r.Sim.Trade(outTradeNo)
	if !ok {
		return fmt.Errorf("count incident 6: the platform has no charge %s", outTradeNo)
	}
	charge, _ := r.Sim.Get(trade.PlatformSerial)
	c.ChargePaid, c.Amount, c.Refunded = charge.Status == psp.StatusPaid, charge.Amount, charge.Refunded
	for _, no := range refundNos {
		if ref, ok := r.Sim.GetRefund(no); ok {
			c.PlatformRefunds++
			c.RefundRequests += ref.Requests
		}
	}
	return nil
}
