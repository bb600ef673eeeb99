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

// Reconcile lists the broken invariants of the payment chain on the order
// side: PAID orders without their order.paid event, order.paid events whose
// order is not PAID, and payment.succeeded messages the consumer gave up
// on (dead letters), each within Config.ReconcileLookback. An empty list is
// the invariant of incident 2.
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
	return as, nil
}
