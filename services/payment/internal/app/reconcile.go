package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconcile reports payments with more than one payment record, paid
// payments whose payment.succeeded outbox row is missing, and payment records
// whose amount differs from their payment's, within Config.ReconcileLookback.
// An empty report is the invariant of incident 2. Each run sets
// payment_reconcile_findings{kind}, which an alert rule watches (anything
// above zero is an incident); a failed run leaves the last counts in place.
func (a *App) Reconcile(ctx context.Context) (payment.Report, error) {
	rep, err := a.store.Reconcile(ctx, a.now().Add(-a.cfg.ReconcileLookback), a.cfg.ReconcileLimit)
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile: %w", err)
	}
	a.findings.WithLabelValues("multiple_records").Set(float64(len(rep.MultipleRecords)))
	a.findings.WithLabelValues("missing_events").Set(float64(len(rep.MissingEvents)))
	a.findings.WithLabelValues("amount_mismatches").Set(float64(len(rep.AmountMismatches)))
	return rep, nil
}
