package app

import (
	"context"
	"fmt"

	"github.com/oncemall/oncemall/services/coupon/internal/coupon"
)

// Reconcile lists the broken invariants (coupon.AnomalyKind): orders
// deducted more than once, USED coupons without a ledger row, ledger rows
// whose coupon is not USED, paid orders whose coupon they did not hold, and
// locks still LOCKED more than LockOverdueAfter past their deadline. It sets
// coupon_reconcile_findings to the count of each kind, so an alert can fire
// on any of them. An empty list means the ledger, the coupons and the locks
// agree.
func (a *App) Reconcile(ctx context.Context) ([]coupon.Anomaly, error) {
	as, err := a.store.Reconcile(ctx, a.now().Add(-a.cfg.LockOverdueAfter))
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	counts := make(map[coupon.AnomalyKind]int, len(coupon.AnomalyKinds))
	for _, an := range as {
		counts[an.Kind]++
	}
	for _, kind := range coupon.AnomalyKinds {
		a.metrics.findings.WithLabelValues(string(kind)).Set(float64(counts[kind]))
	}
	return as, nil
}
