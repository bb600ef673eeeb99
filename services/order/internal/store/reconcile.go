package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// likeEscaper makes a string match itself literally in a LIKE pattern.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Reconcile implements order.Store: read-only queries over orders, the
// outbox (local_message), the inbox's dead letters (dead_message) and the
// stock reservations.
func (s *Store) Reconcile(ctx context.Context, q order.ReconcileQuery) ([]order.Anomaly, error) {
	db := s.db.WithContext(ctx)
	out := []order.Anomaly{}

	// The paid orders are found by status and updated_at, the order
	// service's own clock when MarkPaid ran (idx_orders_status_updated); the
	// event of each by its message number, which the unique key on
	// local_message.message_no indexes.
	var unsent []struct {
		OrderNo string
		Status  string
	}
	if err := db.Raw(`SELECT o.order_no, o.status FROM orders o
		WHERE o.status = ? AND o.updated_at >= ? AND NOT EXISTS (
			SELECT 1 FROM local_message m WHERE m.message_no = CONCAT(?, o.order_no))
		ORDER BY o.order_no LIMIT ?`,
		string(order.StatusPaid), q.Since.UTC(), q.PaidEventPrefix, q.Limit).Scan(&unsent).Error; err != nil {
		return nil, fmt.Errorf("reconcile paid orders without order.paid: %w", err)
	}
	for _, u := range unsent {
		out = append(out, order.Anomaly{Kind: order.AnomalyPaidWithoutEvent, OrderNo: u.OrderNo, Status: order.Status(u.Status),
			MessageID: q.PaidEventPrefix + u.OrderNo})
	}

	var unpaid []struct {
		MessageNo string
		OrderNo   string
		Status    *string // NULL: no such order
	}
	if err := db.Raw(`SELECT m.message_no, SUBSTRING(m.message_no, ?) AS order_no, o.status FROM local_message m
		LEFT JOIN orders o ON o.order_no = SUBSTRING(m.message_no, ?)
		WHERE m.message_no LIKE ? AND (o.order_no IS NULL OR o.status <> ?)
		ORDER BY m.message_no LIMIT ?`,
		len(q.PaidEventPrefix)+1, len(q.PaidEventPrefix)+1, likeEscaper.Replace(q.PaidEventPrefix)+"%",
		string(order.StatusPaid), q.Limit).Scan(&unpaid).Error; err != nil {
		return nil, fmt.Errorf("reconcile order.paid events without a paid order: %w", err)
	}
	for _, u := range unpaid {
		a := order.Anomaly{Kind: order.AnomalyEventWithoutPaid, OrderNo: u.OrderNo, MessageID: u.MessageNo}
		if u.Status != nil {
			a.Status = order.Status(*u.Status)
		}
		out = append(out, a)
	}

	// The dead letters are found by consumer, the first column of
	// uk_dead_message, and recorded since q.Since. A dead letter's body may
	// be what killed it, so it is read as JSON only when it is JSON.
	var dead []struct {
		MessageID string
		Reason    string
		OrderNo   *string
		Status    *string
	}
	const orderNo = `CASE WHEN JSON_VALID(CONVERT(d.body USING utf8mb4))
		THEN JSON_UNQUOTE(JSON_EXTRACT(CONVERT(d.body USING utf8mb4), '$.order_no')) END`
	if err := db.Raw(`SELECT d.message_id, d.reason, `+orderNo+` AS order_no, o.status FROM dead_message d
		LEFT JOIN orders o ON o.order_no = `+orderNo+`
		WHERE d.consumer = ? AND d.created_at >= ? ORDER BY d.id LIMIT ?`, q.DeadConsumer, q.Since.UTC(), q.Limit).Scan(&dead).Error; err != nil {
		return nil, fmt.Errorf("reconcile dead-lettered payments: %w", err)
	}
	for _, d := range dead {
		a := order.Anomaly{Kind: order.AnomalyDeadPayment, MessageID: d.MessageID, Reason: d.Reason}
		if d.OrderNo != nil {
			a.OrderNo = *d.OrderNo
		}
		if d.Status != nil {
			a.Status = order.Status(*d.Status)
		}
		out = append(out, a)
	}

	// Settled orders whose reservations did not settle with them: found by
	// status and updated_at (the time the order service settled them), each
	// order's reservations by the unique key's order_no prefix.
	for _, c := range []struct {
		kind  order.AnomalyKind
		order order.Status
		want  order.ReservationStatus
	}{
		{order.AnomalyPaidUnconfirmedStock, order.StatusPaid, order.Confirmed},
		{order.AnomalyCancelledUnreleasedStock, order.StatusCancelled, order.Released},
	} {
		var rows []struct {
			OrderNo   string
			ProductID uint64
			Status    string
		}
		if err := db.Raw(`SELECT o.order_no, r.product_id, r.status FROM orders o
			JOIN stock_reservation r ON r.order_no = o.order_no
			WHERE o.status = ? AND o.updated_at >= ? AND r.status <> ?
			ORDER BY o.order_no, r.product_id LIMIT ?`,
			string(c.order), q.Since.UTC(), string(c.want), q.Limit).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("reconcile %s: %w", c.kind, err)
		}
		for _, r := range rows {
			out = append(out, order.Anomaly{Kind: c.kind, OrderNo: r.OrderNo, Status: c.order, ProductID: r.ProductID, Reservation: order.ReservationStatus(r.Status)})
		}
	}
	return out, nil
}
