package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/order/internal/order"
)

// PaymentSucceededConsumer is the durable consumer name of the
// payment.succeeded handler (internal/messaging), which runs MarkOrderPaid:
// its dedup scope in processed_message, and the consumer column of its dead
// letters in dead_message, which Reconcile reads by it.
const PaymentSucceededConsumer = "order-payment-succeeded"

// reconcileLimit caps each kind's list in a reconciliation: enough to see
// the extent of a problem without reading a whole table into one answer.
const reconcileLimit = 1000

// Reconcile lists the broken invariants on the order side, each within
// Config.ReconcileLookback: PAID orders without their order.paid event,
// order.paid events whose order is not PAID, payment.succeeded messages the
// consumer gave up on (dead letters), PAID orders with a reservation that
// is not CONFIRMED and CANCELLED orders with one that is not RELEASED. An
// empty list is the invariant of incidents 2 and 5. Each run sets
// order_reconcile_findings{kind}, which an alert watches (anything above
// zero is an incident); a failed run leaves the last counts in place.
func (a *App) Reconcile(ctx context.Context) ([]order.Anomaly, error) {
	as, err := a.orders.Reconcile(ctx, order.ReconcileQuery{
		PaidEventPrefix: orderPaidEventPrefix,
		Since:           a.now().Add(-a.cfg.ReconcileLookback),
		DeadConsumer:    PaymentSucceededConsumer,
		Limit:           reconcileLimit,
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	counts := make(map[order.AnomalyKind]int, len(order.AnomalyKinds))
	for _, an := range as {
		counts[an.Kind]++
	}
	for _, k := range order.AnomalyKinds {
		a.m.findings.WithLabelValues(string(k)).Set(float64(counts[k]))
	}
	return as, nil
}
