package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/events"
)

// Check is one invariant as judged at the end of a run.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Found is what broke it (rows, anomalies), empty when it holds.
	Found string `json:"found,omitempty"`
	// eventual marks an invariant the flow reaches once every event is
	// delivered (an order paid at the platform becomes PAID): the checker
	// waits for it up to --settle. The others can never repair themselves.
	eventual bool
}

// checker judges the invariants from the databases, JetStream and the
// reconcilers.
type checker struct {
	db  *sql.DB
	t   Targets
	c   *client
	cat catalog
	st  *stats
}

// q names a table of one of the three databases.
func (k *checker) q(db, table string) string { return "`" + db + "`." + table }

// count runs a COUNT(*) query.
func (k *checker) count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	err := k.db.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

func (k *checker) users() (uint64, uint64) { return k.cat.UserBase, k.cat.UserBase + 999_999 }

// check evaluates every invariant once.
func (k *checker) check(ctx context.Context) []Check {
	o, cp, p := k.t.OrderDB, k.t.CouponDB, k.t.PaymentDB
	lo, hi := k.users()
	products := "0"
	for _, id := range k.cat.ProductIDs {
		products += fmt.Sprintf(",%d", id)
	}
	type sqlCheck struct {
		name     string
		eventual bool
		query    string
		args     []any
	}
	sqlChecks := []sqlCheck{
		{"one order per Idempotency-Key (each customer submits one)", false,
			"SELECT COUNT(*) FROM (SELECT user_id FROM " + k.q(o, "orders") + " WHERE user_id BETWEEN ? AND ? GROUP BY user_id HAVING COUNT(*) > 1) x", []any{lo, hi}},
		{"one payment per order", false,
			"SELECT COUNT(*) FROM (SELECT order_no FROM " + k.q(p, "payments") + " WHERE user_id BETWEEN ? AND ? GROUP BY order_no HAVING COUNT(*) > 1) x", []any{lo, hi}},
		{"one payment record per payment (payment_transaction)", false,
			"SELECT COUNT(*) FROM (SELECT t.out_trade_no FROM " + k.q(p, "payment_transaction") + " t JOIN " + k.q(p, "payments") + " p ON p.out_trade_no = t.out_trade_no WHERE p.user_id BETWEEN ? AND ? GROUP BY t.out_trade_no HAVING COUNT(*) > 1) x", []any{lo, hi}},
		{"one coupon deduction per order", false,
			"SELECT COUNT(*) FROM (SELECT order_no FROM " + k.q(cp, "coupon_deduction") + " WHERE user_id BETWEEN ? AND ? GROUP BY order_no HAVING COUNT(*) > 1) x", []any{lo, hi}},
		{"deductions only for paid orders", false,
			"SELECT COUNT(*) FROM " + k.q(cp, "coupon_deduction") + " d LEFT JOIN " + k.q(o, "orders") + " o ON o.order_no = d.order_no WHERE d.user_id BETWEEN ? AND ? AND (o.status IS NULL OR o.status <> 'PAID')", []any{lo, hi}},
		{"no paid order whose payment is not PAID", false,
			"SELECT COUNT(*) FROM " + k.q(o, "orders") + " o LEFT JOIN " + k.q(p, "payments") + " p ON p.order_no = o.order_no WHERE o.user_id BETWEEN ? AND ? AND o.status = 'PAID' AND (p.status IS NULL OR p.status <> 'PAID' OR p.out_trade_no <> o.payment_no)", []any{lo, hi}},
		{"stock never negative", false,
			"SELECT COUNT(*) FROM " + k.q(o, "product_stock") + " WHERE product_id IN (" + products + ") AND available < 0", nil},
		{"reservations balanced: available + reserved + confirmed = the stock set", false,
			"SELECT COUNT(*) FROM " + k.q(o, "product_stock") + " s LEFT JOIN (SELECT product_id, SUM(quantity) q FROM " + k.q(o, "stock_reservation") +
				" WHERE product_id IN (" + products + ") AND status IN ('RESERVED','CONFIRMED') GROUP BY product_id) r ON r.product_id = s.product_id WHERE s.product_id IN (" + products + ") AND s.available + COALESCE(r.q, 0) <> ?", []any{k.cat.Stock}},
		{"reservations follow their order (PAID: confirmed, CANCELLED: released, WAIT_PAY: reserved)", false,
			"SELECT COUNT(*) FROM " + k.q(o, "stock_reservation") + " r JOIN " + k.q(o, "orders") + " o ON o.order_no = r.order_no WHERE r.product_id IN (" + products + ") AND NOT ((o.status = 'PAID' AND r.status = 'CONFIRMED') OR (o.status = 'CANCELLED' AND r.status = 'RELEASED') OR (o.status = 'WAIT_PAY' AND r.status = 'RESERVED'))", nil},
		{"every payment paid at the platform has its order PAID", true,
			"SELECT COUNT(*) FROM " + k.q(p, "payments") + " p LEFT JOIN " + k.q(o, "orders") + " o ON o.order_no = p.order_no WHERE p.user_id BETWEEN ? AND ? AND p.status = 'PAID' AND (o.status IS NULL OR o.status <> 'PAID')", []any{lo, hi}},
		{"every paid order with a coupon has its deduction", true,
			"SELECT COUNT(*) FROM " + k.q(o, "orders") + " o LEFT JOIN " + k.q(cp, "coupon_deduction") + " d ON d.order_no = o.order_no WHERE o.user_id BETWEEN ? AND ? AND o.status = 'PAID' AND o.coupon_id IS NOT NULL AND d.id IS NULL", []any{lo, hi}},
		{"no coupon still locked by a cancelled order", true,
			"SELECT COUNT(*) FROM " + k.q(cp, "coupons") + " c JOIN " + k.q(o, "orders") + " o ON o.order_no = c.locked_order_no WHERE c.user_id BETWEEN ? AND ? AND o.status = 'CANCELLED' AND c.status = 'LOCKED'", []any{lo, hi}},
		{"no outbox row failed (all three services)", false,
			"SELECT (SELECT COUNT(*) FROM " + k.q(o, "local_message") + " WHERE status = 'failed') + (SELECT COUNT(*) FROM " + k.q(cp, "local_message") + " WHERE status = 'failed') + (SELECT COUNT(*) FROM " + k.q(p, "local_message") + " WHERE status = 'failed')", nil},
		{"no outbox row stuck pending", true,
			"SELECT (SELECT COUNT(*) FROM " + k.q(o, "local_message") + " WHERE status = 'pending') + (SELECT COUNT(*) FROM " + k.q(cp, "local_message") + " WHERE status = 'pending') + (SELECT COUNT(*) FROM " + k.q(p, "local_message") + " WHERE status = 'pending')", nil},
		{"no inbox dead letter (all three services)", false,
			"SELECT (SELECT COUNT(*) FROM " + k.q(o, "dead_message") + ") + (SELECT COUNT(*) FROM " + k.q(cp, "dead_message") + ") + (SELECT COUNT(*) FROM " + k.q(p, "dead_message") + ")", nil},
		{"no coupon message FAILED", false,
			"SELECT COUNT(*) FROM " + k.q(cp, "coupon_message") + " WHERE status = 'FAILED'", nil},
		{"no coupon message left PENDING", true,
			"SELECT COUNT(*) FROM " + k.q(cp, "coupon_message") + " WHERE status = 'PENDING'", nil},
	}
	var out []Check
	for _, c := range sqlChecks {
		n, err := k.count(ctx, c.query, c.args...)
		ch := Check{Name: c.name, OK: err == nil && n == 0, eventual: c.eventual}
		switch {
		case err != nil:
			ch.Found = "query failed: " + err.Error()
			ch.eventual = true // the database may be back in a moment
		case n != 0:
			ch.Found = fmt.Sprintf("%d rows", n)
		}
		out = append(out, ch)
	}

	k.st.mu.Lock()
	an, first := k.st.anomalyN, strings.Join(k.st.anomalies, "; ")
	k.st.mu.Unlock()
	ch := Check{Name: "one answer per Idempotency-Key (double submits)", OK: an == 0}
	if an != 0 {
		ch.Found = fmt.Sprintf("%d: %.500s", an, first)
	}
	out = append(out, ch)

	if k.t.NATSURL != "" {
		out = append(out, k.jetstream(ctx))
	}
	out = append(out, k.reconcilers(ctx)...)
	return out
}

// jetstream checks that every durable consumer of the services' streams
// has delivered and had acknowledged everything.
func (k *checker) jetstream(ctx context.Context) Check {
	ch := Check{Name: "JetStream consumers drained (nothing pending or unacknowledged)", eventual: true}
	nc, err := nats.Connect(k.t.NATSURL, nats.Timeout(3*time.Second), nats.MaxReconnects(0))
	if err != nil {
		ch.Found = "connect: " + err.Error()
		return ch
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		ch.Found = err.Error()
		return ch
	}
	var found []string
	ev := events.Config{SubjectPrefix: k.t.SubjectPrefix}
	for _, subject := range []string{events.OrderPaid, events.PaymentSucceeded} {
		name := ev.StreamName(subject)
		stream, err := js.Stream(ctx, name)
		if err != nil {
			found = append(found, fmt.Sprintf("stream %s: %v", name, err))
			continue
		}
		lister := stream.ListConsumers(ctx)
		for info := range lister.Info() {
			if info.NumPending != 0 || info.NumAckPending != 0 {
				found = append(found, fmt.Sprintf("%s/%s: %d pending, %d unacknowledged", name, info.Name, info.NumPending, info.NumAckPending))
			}
		}
		if err := lister.Err(); err != nil {
			found = append(found, fmt.Sprintf("stream %s consumers: %v", name, err))
		}
	}
	ch.OK = len(found) == 0
	ch.Found = strings.Join(found, "; ")
	return ch
}

// reconcilers asks every service's reconciler (any replica) and wants each
// empty.
func (k *checker) reconcilers(ctx context.Context) []Check {
	var out []Check
	for _, svc := range []struct {
		name string
		urls []string
	}{{"order", k.t.Order}, {"coupon", k.t.Coupon}, {"payment", k.t.Payment}} {
		ch := Check{Name: svc.name + " reconciler empty", eventual: true}
		a, err := k.c.do(ctx, request{step: "GET /admin/reconcile", method: "GET", urls: svc.urls, path: "/admin/reconcile", headers: k.c.admin(), retry: retryOperator, timeout: 30 * time.Second})
		switch {
		case err != nil:
			ch.Found = err.Error()
		case a.Status != http.StatusOK:
			ch.Found = fmt.Sprintf("%d %.300s", a.Status, a.Body)
		default:
			var r struct {
				Anomalies []json.RawMessage `json:"anomalies"`
				Empty     *bool             `json:"empty"`
			}
			if err := json.Unmarshal(a.Body, &r); err != nil {
				ch.Found = err.Error()
				break
			}
			if svc.name == "payment" {
				ch.OK = r.Empty != nil && *r.Empty
			} else {
				ch.OK = r.Anomalies != nil && len(r.Anomalies) == 0
			}
			if !ch.OK {
				ch.Found = fmt.Sprintf("%.600s", a.Body)
			}
		}
		out = append(out, ch)
	}
	return out
}

// settle re-checks until every invariant holds, one that cannot repair
// itself breaks, or the deadline passes; it returns the last verdicts.
func (k *checker) settle(ctx context.Context, within time.Duration) ([]Check, time.Duration) {
	began := time.Now()
	deadline := began.Add(within)
	for {
		checks := k.check(ctx)
		allOK, final := true, false
		for _, c := range checks {
			if !c.OK {
				allOK = false
				final = final || !c.eventual
			}
		}
		if allOK || final || time.Now().After(deadline) || ctx.Err() != nil {
			return checks, time.Since(began)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// paidCount counts the run's PAID orders, for the progress line.
func (k *checker) paidCount(ctx context.Context) int {
	lo, hi := k.users()
	n, _ := k.count(ctx, "SELECT COUNT(*) FROM "+k.q(k.t.OrderDB, "orders")+" WHERE user_id BETWEEN ? AND ? AND status = 'PAID'", lo, hi)
	return n
}

// FlowLatency is the flow's timing read from the databases: from the order
// created (orders.created_at) to its payment recorded
// (payment_transaction.created_at), to the order PAID (its updated_at once
// PAID, a final state), and to the coupon used (coupon_deduction.created_at).
type FlowLatency struct {
	CreatedToPaymentRecorded Percentiles `json:"created_to_payment_recorded"`
	CreatedToOrderPaid       Percentiles `json:"created_to_order_paid"`
	CreatedToCouponUsed      Percentiles `json:"created_to_coupon_used"`
	// Completed counts purchases done end to end: the order PAID and, if it
	// had a coupon, the coupon used.
	Completed int `json:"completed"`
	// CompletedInWindow counts those completed during the load (from its
	// start to its end); PerSecond is that over the load's duration: the
	// goodput.
	CompletedInWindow int     `json:"completed_in_window"`
	PerSecond         float64 `json:"completed_per_second"`
	Orders            int     `json:"orders"`
	Paid              int     `json:"paid"`
	Cancelled         int     `json:"cancelled"`
	WaitPay           int     `json:"wait_pay"`
}

// orderRow is one of the run's orders and the times of its flow.
type orderRow struct {
	user             uint64
	status           string
	withCoupon       bool
	created, updated time.Time
	recorded, used   sql.NullTime
}

// done reports whether the purchase completed end to end, and when.
func (o orderRow) done() (time.Time, bool) {
	switch {
	case o.status != "PAID":
		return time.Time{}, false
	case !o.withCoupon:
		return o.updated, true
	case o.used.Valid:
		return o.used.Time, true
	}
	return time.Time{}, false
}

// orders reads the run's orders with the times of their flow.
func (k *checker) orders(ctx context.Context) ([]orderRow, error) {
	o, cp, p := k.t.OrderDB, k.t.CouponDB, k.t.PaymentDB
	lo, hi := k.users()
	rows, err := k.db.QueryContext(ctx, "SELECT o.user_id, o.status, o.coupon_id IS NOT NULL, o.created_at, o.updated_at, t.created_at, d.created_at FROM "+k.q(o, "orders")+" o"+
		" LEFT JOIN "+k.q(p, "payments")+" p ON p.order_no = o.order_no AND p.status = 'PAID'"+
		" LEFT JOIN "+k.q(p, "payment_transaction")+" t ON t.out_trade_no = p.out_trade_no"+
		" LEFT JOIN "+k.q(cp, "coupon_deduction")+" d ON d.order_no = o.order_no"+
		" WHERE o.user_id BETWEEN ? AND ? ORDER BY o.created_at", lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []orderRow
	for rows.Next() {
		var r orderRow
		if err := rows.Scan(&r.user, &r.status, &r.withCoupon, &r.created, &r.updated, &r.recorded, &r.used); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// flowOf summarises rows, counting as in the window the purchases that
// completed from from to to.
func flowOf(rows []orderRow, from, to time.Time) FlowLatency {
	var f FlowLatency
	var toRec, toPaid, toUsed []time.Duration
	for _, r := range rows {
		f.Orders++
		switch r.status {
		case "PAID":
			f.Paid++
		case "CANCELLED":
			f.Cancelled++
		default:
			f.WaitPay++
		}
		if r.status != "PAID" {
			continue
		}
		if r.recorded.Valid {
			toRec = append(toRec, r.recorded.Time.Sub(r.created))
		}
		toPaid = append(toPaid, r.updated.Sub(r.created))
		if r.withCoupon && r.used.Valid {
			toUsed = append(toUsed, r.used.Time.Sub(r.created))
		}
		if at, ok := r.done(); ok {
			f.Completed++
			if !at.Before(from) && at.Before(to) {
				f.CompletedInWindow++
			}
		}
	}
	f.CreatedToPaymentRecorded, f.CreatedToOrderPaid, f.CreatedToCouponUsed = percentiles(toRec), percentiles(toPaid), percentiles(toUsed)
	if s := to.Sub(from).Seconds(); s > 0 {
		f.PerSecond = float64(f.CompletedInWindow) / s
	}
	return f
}
