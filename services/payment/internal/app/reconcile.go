package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconcile reports payments with more than one payment record, paid
// payments whose payment.succeeded outbox row is missing, and payment records
// whose amount differs from their payment's. An empty report is the
// invariant of incident 2.
func (a *App) Reconcile(ctx context.Context) (payment.Report, error) {
	rep, err := a.store.Reconcile(ctx, a.cfg.ReconcileLimit)
	if err != nil {
		return payment.Report{}, fmt.Errorf("reconcile: %w", err)
	}
	return rep, nil
}
