package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// reconcileLimit caps each kind's list in a reconciliation: enough to see
// the extent of a problem without reading a whole table into one answer.
const reconcileLimit = 1000

// Reconcile lists the broken invariants of the payment chain on the order
// side: PAID orders without their order.paid event, order.paid events whose
// order is not PAID, and payment.succeeded messages the consumer gave up
// on (dead letters). An empty list is the invariant of incident 2.
func (a *App) Reconcile(ctx context.Context) ([]order.Anomaly, error) {
	as, err := a.store.Reconcile(ctx, order.ReconcileQuery{
		PaidEventPrefix: orderPaidEventPrefix,
		PaidSince:       a.now().Add(-a.reconcileLookback),
		DeadSubject:     a.subjectPrefix + events.PaymentSucceeded,
		Limit:           reconcileLimit,
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return as, nil
}
