package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/services/order/internal/order"
)

// Reconciler is the use case the order-reconcile job runs
// (app.App.Reconcile).
type Reconciler interface {
	Reconcile(ctx context.Context) ([]order.Anomaly, error)
}

// reconcileTimeout bounds one run, so that a stuck query cannot hold the
// job (and its lock) until the next deploy.
const reconcileTimeout = 30 * time.Second

// Reconcile runs the reconciliation on schedule and logs what it finds as
// an alert, with each kind's count; the use case keeps
// order_reconcile_findings up to date.
func Reconcile(r Reconciler, schedule string, log *slog.Logger) platform.Job {
	return platform.Job{Name: "order-reconcile", Schedule: schedule, Run: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, reconcileTimeout)
		defer cancel()
		as, err := r.Reconcile(ctx)
		if err != nil {
			return err
		}
		if len(as) == 0 {
			return nil
		}
		counts := make(map[order.AnomalyKind]int)
		for _, a := range as {
			counts[a.Kind]++
		}
		attrs := []any{"alert", "order_reconcile", "findings", len(as)}
		for _, k := range order.AnomalyKinds {
			attrs = append(attrs, string(k), counts[k])
		}
		log.ErrorContext(ctx, "reconciliation found broken invariants on the order side", attrs...)
		return nil
	}}
}
