// Package jobs holds the payment service's scheduled jobs; they are thin
// and call the app.
package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/payment/internal/payment"
)

// Reconciler is the use case the reconcile job runs (app.App.Reconcile).
type Reconciler interface {
	Reconcile(ctx context.Context) (payment.Report, error)
}

// reconcileTimeout bounds one run, so that a stuck query cannot hold the
// job (and its lock) until the next deploy.
const reconcileTimeout = 30 * time.Second

// Reconcile runs the reconciliation on schedule and logs what it finds as
// an alert; the use case keeps payment_reconcile_findings up to date.
func Reconcile(r Reconciler, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "payment-reconcile", Schedule: schedule, Run: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		defer cancel()
		rep, err := r.Reconcile(ctx)
		if err != nil {
			return err
		}
		if !rep.Empty() {
			counts := rep.Counts()
			attrs := []any{"alert", "payment_reconcile"}
			for _, kind := range payment.Kinds {
				attrs = append(attrs, kind, counts[kind])
			}
			log.ErrorContext(ctx, "reconciliation found inconsistent payments", attrs...)
		}
		return nil
	}}
}
