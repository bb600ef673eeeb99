package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconcile reports, within Config.ReconcileLookback: payments with more
// than one payment record, paid payments whose payment.succeeded outbox row
// is missing, payment records whose amount differs from their payment's
// (incident 2's invariants); PAID payments of cancelled orders that no
// refund gives back, refunds still waiting for the platform after
// Config.RefundAlertAfter, payments still WAIT_PAY past
// Config.QueryHorizon, and refunded payments without their payment.refunded
// row (the close and refund invariants). An empty report is the invariant.
// Each run sets payment_reconcile_findings{kind} for every kind, which an
// alert rule watches (anything above zero is an incident); a failed run
// leaves the last counts in place.
func (a *App) Reconcile(ctx context.Context) (payment.Report, error) {
	now := a.now()
	rep, err := a.store.Reconcile(ctx, payment.ReconcileQuery{
		Since:         now.Add(-a.cfg.ReconcileLookback),
		RefundsBefore: now.Add(-a.cfg.RefundAlertAfter),
		WaitPayBefore: now.Add(-a.cfg.QueryHorizon),
		Limit:         a.cfg.ReconcileLimit,
	})
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile: %w", err)
	}
	counts := rep.Counts()
	for _, kind := range payment.Kinds {
		a.m.findings.WithLabelValues(kind).Set(float64(counts[kind]))
	}
	return rep, nil
}
