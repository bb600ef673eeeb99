package store

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconcile reads the payment record tables, the payments, the refunds and
// the outbox. It only reads.
func (s *Store) Reconcile(ctx context.Context, q payment.ReconcileQuery) (payment.Report, error) {
	db := s.db.WithContext(ctx)
	rep := payment.Report{MultipleRecords: []payment.RecordCount{}, MissingEvents: []string{}, AmountMismatches: []payment.AmountMismatch{},
		PaidCancelled: []string{}, LateRefunds: []payment.LateRefund{}, StaleWaitPay: []string{}, MissingRefundEvents: []string{}}
	since, limit := q.Since, q.Limit

	// The broken handler's table exists only where the lab schema is
	// applied; where it does, its rows are payment records too, and the
	// damage they show is what reconciliation is for.
	lab, err := s.hasBrokenRecords(db)
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile: %w", err)
	}
	records := `SELECT out_trade_no, channel, platform_serial, amount, created_at FROM ` + tableTransaction
	if lab {
		records += ` UNION ALL SELECT out_trade_no, channel, platform_serial, amount, created_at FROM ` + tableTransactionBroken
	}
	err = db.Raw(`SELECT r.out_trade_no, COUNT(*) AS records FROM (`+records+`) r
		WHERE r.created_at >= ? GROUP BY r.out_trade_no HAVING COUNT(*) > 1 ORDER BY r.out_trade_no LIMIT ?`, since, limit).
		Scan(&rep.MultipleRecords).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile records: %w", err)
	}

	// The payment.succeeded body names the payment (payment_no); matching on
	// it finds the events of both handlers, whose message numbers differ.
	// The same holds for payment.refunded. The body match reads every event
	// of the topic for each payment, so the fixed handler's event is looked
	// up first by its message number (the unique key): only a payment
	// without it is matched on bodies. Without that first lookup the query
	// reads payments × events bodies, seconds at a few thousand payments.
	missing := `SELECT p.out_trade_no FROM payments p
		WHERE p.status = ? AND p.%s >= ?
		AND NOT EXISTS (SELECT 1 FROM local_message m WHERE m.message_no = CONCAT(?, p.out_trade_no))
		AND NOT EXISTS (
			SELECT 1 FROM local_message m WHERE m.topic = ?
			AND JSON_UNQUOTE(JSON_EXTRACT(CONVERT(m.body USING utf8mb4), '$.payment_no')) = p.out_trade_no)
		ORDER BY p.out_trade_no LIMIT ?`
	err = db.Raw(fmt.Sprintf(missing, "paid_at"), string(payment.StatusPaid), since, "payment-succeeded-", events.PaymentSucceeded, limit).
		Scan(&rep.MissingEvents).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile events: %w", err)
	}
	err = db.Raw(fmt.Sprintf(missing, "updated_at"), string(payment.StatusRefunded), since, "payment-refunded-"+payment.RefundNoFor(""), events.PaymentRefunded, limit).
		Scan(&rep.MissingRefundEvents).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile refund events: %w", err)
	}

	err = db.Raw(`SELECT r.out_trade_no, r.platform_serial, p.amount AS expected, r.amount AS recorded
		FROM (`+records+`) r JOIN payments p ON p.out_trade_no = r.out_trade_no
		WHERE r.amount <> p.amount AND r.created_at >= ? ORDER BY r.out_trade_no LIMIT ?`, since, limit).
		Scan(&rep.AmountMismatches).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile amounts: %w", err)
	}

	// A payment kept PAID although its order was cancelled: the money is
	// kept and nothing ships. The fixed close never lets one happen (the
	// late payment goes CLOSED → REFUNDING instead); the refund row is
	// checked too, so that a paid payment with a refund under way is not
	// reported.
	err = db.Raw(`SELECT p.out_trade_no FROM payments p
		WHERE p.status = ? AND p.order_cancelled_at IS NOT NULL AND p.order_cancelled_at >= ?
		AND NOT EXISTS (SELECT 1 FROM refund f WHERE f.out_trade_no = p.out_trade_no)
		ORDER BY p.out_trade_no LIMIT ?`, string(payment.StatusPaid), since, limit).
		Scan(&rep.PaidCancelled).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile cancelled orders: %w", err)
	}

	err = db.Raw(`SELECT refund_no, out_trade_no, status, attempts, last_error, created_at FROM refund
		WHERE status <> ? AND created_at >= ? AND created_at < ? ORDER BY created_at, id LIMIT ?`,
		string(payment.RefundDone), since, q.RefundsBefore, limit).
		Scan(&rep.LateRefunds).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile refunds: %w", err)
	}

	err = db.Raw(`SELECT out_trade_no FROM payments WHERE status = ? AND created_at >= ? AND created_at < ?
		ORDER BY created_at, id LIMIT ?`, string(payment.StatusWaitPay), since, q.WaitPayBefore, limit).
		Scan(&rep.StaleWaitPay).Error
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile waiting payments: %w", err)
	}
	return rep, nil
}
